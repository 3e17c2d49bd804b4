// The multi-device schedule file (ios-farm-multi/v1): what it records, that
// it reads back, and every malformed schedule it must refuse, the one that
// would deadlock the devices included.
#include "coordinator/multi_schedule.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/ios_json.h"
#include "common/zoo.h"
#include "tests/coordinator/search_testing.h"
#include "tests/exec/exec_testing.h"
#include "tests/testing/multi_device.h"
#include "tests/testing/ops.h"
#include "tests/testing/process.h"

namespace ios::coordinator {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;
using testing::TempDirTest;

// in -> a -> d, in -> c -> b, e = b + d: two independent chains joined.
Graph TwoChains() {
  exec::testing::GraphBuilder g({4, 6, 6}, "two_chains");
  const NodeId a = g.Add("a", ::ios::testing::ConvOp(4, 3, 1, 1), {{g.S(0)}});
  const NodeId c = g.Add("c", ::ios::testing::ConvOp(4, 1), {{g.S(0)}});
  const NodeId d = g.Add("d", ::ios::testing::ConvOp(4, 1), {{g.S(a)}});
  const NodeId b = g.Add("b", ::ios::testing::ConvOp(4, 3, 1, 1), {{g.S(c)}});
  g.Add("e", ::ios::testing::EltwiseOp(EltwiseType::kAdd), {{g.S(b)}, {g.S(d)}});
  return g.Done();
}

// Ids of TwoChains: a 1, c 2, d 3, b 4, e 5.
MultiDeviceSchedule ChainsOnTwoDevices() {
  MultiDeviceSchedule q = SingletonMultiSchedule(TwoChains(), {-1, 0, 1, 1, 0, 0}, 2);
  q.devices = {"cpu,threads=1,cpus=0", "cpu,threads=1,cpus=1"};
  return q;
}

class MultiScheduleTest : public TempDirTest {
 protected:
  //! Writes `q` of `graph`, lets `edit` change the document, and loads it.
  LoadedMultiSchedule WriteAndLoad(const Graph& graph, const MultiDeviceSchedule& q,
                                   const std::function<void(json&)>& edit = nullptr) {
    MultiScheduleInfo info;
    info.model = graph.name;
    json doc = json::parse(MultiScheduleToJson(graph, q, info));
    if (edit) edit(doc);
    path_ = PathIn("multi.json");
    EXPECT_TRUE(::ios::testing::WriteFile(path_, doc.dump(2)));
    return LoadMultiSchedule(path_);
  }

  //! The message of loading the edited file; fails the test when it loads.
  std::string Refusal(const std::function<void(json&)>& edit) {
    return Refusal(TwoChains(), ChainsOnTwoDevices(), edit);
  }
  std::string Refusal(const Graph& graph, const MultiDeviceSchedule& q,
                      const std::function<void(json&)>& edit) {
    try {
      WriteAndLoad(graph, q, edit);
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), HasSubstr(path_)) << "the message names the file";
      return e.what();
    }
    ADD_FAILURE() << "loaded";
    return "";
  }

  std::string path_;
};

TEST_F(MultiScheduleTest, SqueezenetWithAlternatingBranchesRoundTrips) {
  const Graph g = BuildZooModel("squeezenet");
  MultiDeviceSchedule q = SingletonMultiSchedule(g, ::ios::testing::AlternateBranches(g, 2), 2);
  q.devices = {"cpu,threads=1,cpus=0", "cpu,threads=1,cpus=1"};
  MultiScheduleInfo info;
  info.model = "squeezenet";
  info.batch_size = 2;
  info.mapper = "lp";
  info.window = 2;
  info.streams = 2;
  info.simulated = true;
  info.predicted_ms = 1.5;
  info.sequential_ms = 3.0;
  const std::string path = PathIn("squeezenet.json");
  ASSERT_TRUE(::ios::testing::WriteFile(path, MultiScheduleToJson(g, q, info)));
  ASSERT_TRUE(IsMultiScheduleFile(path));

  const LoadedMultiSchedule loaded = LoadMultiSchedule(path);
  std::string difference;
  EXPECT_TRUE(StructurallyEqual(loaded.graph, g, &difference)) << difference;
  EXPECT_EQ(loaded.schedule.devices, q.devices);
  EXPECT_EQ(loaded.schedule.device_of, q.device_of);
  ASSERT_EQ(loaded.schedule.stages.size(), 2u);
  for (size_t d = 0; d < 2; ++d) {
    ASSERT_EQ(loaded.schedule.stages[d].size(), q.stages[d].size());
    for (size_t k = 0; k < q.stages[d].size(); ++k) {
      EXPECT_EQ(loaded.schedule.stages[d][k].groups, q.stages[d][k].groups);
    }
  }
  EXPECT_EQ(loaded.info.batch_size, 2);
  EXPECT_EQ(loaded.info.mapper, "lp");
  EXPECT_EQ(loaded.info.window, 2);
  EXPECT_EQ(loaded.info.streams, 2);
  EXPECT_TRUE(loaded.info.simulated);
  EXPECT_EQ(loaded.info.predicted_ms, 1.5);
  EXPECT_EQ(loaded.info.sequential_ms, 3.0);
  EXPECT_FALSE(loaded.info.single_device_ms.has_value());
  // Both devices have work and tensors cross between them.
  EXPECT_FALSE(q.stages[0].empty());
  EXPECT_FALSE(q.stages[1].empty());
  EXPECT_FALSE(MultiTransfers(g, q, 2).empty());
}

TEST_F(MultiScheduleTest, RecordsOneCopyPerProducerAndReceivingDevice) {
  const Graph g = TwoChains();
  const LoadedMultiSchedule loaded = WriteAndLoad(g, ChainsOnTwoDevices());
  const json doc = json::parse(::ios::testing::ReadFile(path_));
  EXPECT_EQ(doc.at("format"), "ios-farm-multi/v1");
  EXPECT_EQ(doc.at("device_of").at("c"), 1);
  EXPECT_EQ(doc.at("stages").at(1).at(0).at("groups"), json::parse(R"([["c"]])"));
  // a goes to d, c to b, d to e: 4 channels of 6x6 float32 each.
  const json expected = json::parse(R"([{"producer": "a", "from": 0, "to": 1, "bytes": 576},
                                        {"producer": "c", "from": 1, "to": 0, "bytes": 576},
                                        {"producer": "d", "from": 1, "to": 0, "bytes": 576}])");
  EXPECT_EQ(doc.at("transfers"), expected);
  const std::vector<Transfer> transfers = MultiTransfers(g, loaded.schedule, 2);
  ASSERT_EQ(transfers.size(), 3u);
  EXPECT_EQ(transfers[2], (Transfer{3, 1, 0, 1152})) << "bytes at batch 2";
}

TEST_F(MultiScheduleTest, RecognisesOnlyMultiDeviceFiles) {
  EXPECT_FALSE(IsMultiScheduleFile(PathIn("missing.json")));
  const std::string single = PathIn("single.json");
  ASSERT_TRUE(::ios::testing::WriteFile(single, R"({"format": "ios-farm-schedule"})"));
  EXPECT_FALSE(IsMultiScheduleFile(single));
  EXPECT_THAT([&] { LoadMultiSchedule(single); },
              ::testing::ThrowsMessage<Error>(HasSubstr("format: expected")));
}

TEST_F(MultiScheduleTest, RefusesAnOperatorScheduledTwice) {
  EXPECT_THAT(Refusal([](json& doc) { doc["stages"][0].push_back(doc["stages"][0][0]); }),
              HasSubstr("node 'a' is scheduled twice (also device 0 stage 0)"));
}

TEST_F(MultiScheduleTest, RefusesAnOperatorInNoStage) {
  EXPECT_THAT(Refusal([](json& doc) { doc["stages"][1].erase(0); }),
              HasSubstr("node 'c' is in no stage of device 1"));
}

TEST_F(MultiScheduleTest, RefusesAnOperatorOnAnotherDeviceThanDeviceOfSays) {
  EXPECT_THAT(Refusal([](json& doc) { doc["device_of"]["c"] = 0; }),
              HasSubstr("device 1 stage 0: node 'c' is on device 0 by device_of"));
}

TEST_F(MultiScheduleTest, RefusesStagesOutOfDependencyOrderOnADevice) {
  EXPECT_THAT(Refusal([](json& doc) {
                auto& dev0 = doc["stages"][0];  // a, b, e: e before b
                std::swap(dev0[1], dev0[2]);
              }),
              HasSubstr("node 'e' does not run after its producer 'b'"));
}

TEST_F(MultiScheduleTest, RefusesStagesThatWouldDeadlockTheDevices) {
  // Device 0 runs {a, b} as one stage, device 1 runs d then c: a and b are
  // independent, yet b needs c, which runs after d, which needs a.
  const Graph g = TwoChains();
  MultiDeviceSchedule q;
  q.devices = {"cpu", "cpu"};
  q.device_of = {-1, 0, 1, 1, 0, 0};
  q.stages = {{{Strategy::kParallel, {{1}, {4}}}, {Strategy::kParallel, {{5}}}},
              {{Strategy::kParallel, {{3}}}, {Strategy::kParallel, {{2}}}}};
  EXPECT_THAT([&] { CheckMultiSchedule(g, q, "q.json"); },
              ::testing::ThrowsMessage<Error>(HasSubstr(
                  "q.json: the devices would wait on each other for ever (a cycle of stages): "
                  "device 0 stage 0 waits for 'c' from device 1 stage 1, which runs after device "
                  "1 stage 0, which waits for 'a' from device 0 stage 0")));
  // The same order with a and b apart runs.
  q.stages[0] = {
      {Strategy::kParallel, {{1}}}, {Strategy::kParallel, {{4}}}, {Strategy::kParallel, {{5}}}};
  EXPECT_NO_THROW(CheckMultiSchedule(g, q, "q.json"));
}

TEST_F(MultiScheduleTest, RefusesUnknownNamesAndMissingPlaces) {
  EXPECT_THAT(Refusal([](json& doc) { doc["stages"][0][0]["groups"][0][0] = "zz"; }),
              HasSubstr("device 0 stage 0: unknown operator 'zz'"));
  EXPECT_THAT(Refusal([](json& doc) { doc["device_of"].erase("e"); }),
              HasSubstr("device_of: node 'e' has no device"));
  EXPECT_THAT(Refusal([](json& doc) { doc["device_of"]["in"] = 0; }),
              HasSubstr("'in' is the network input"));
  EXPECT_THAT(Refusal([](json& doc) { doc["device_of"]["e"] = 2; }),
              HasSubstr("device_of: node 'e' is on device 2, not one of the 2"));
  EXPECT_THAT(Refusal([](json& doc) { doc["stages"].push_back(json::array()); }),
              HasSubstr("stages: 3 stage lists for 2 devices"));
  EXPECT_THAT(Refusal([](json& doc) { doc["devices"][1] = ""; }),
              HasSubstr("devices[1]: empty name"));
  EXPECT_THAT(Refusal([](json& doc) { doc["stages"][0][0]["strategy"] = "fast"; }),
              HasSubstr("device 0 stage 0: unknown strategy 'fast'"));
}

TEST_F(MultiScheduleTest, RefusesTransfersThatDeviceOfDoesNotImply) {
  EXPECT_THAT(
      Refusal([](json& doc) { doc["transfers"][0]["bytes"] = 1; }),
      HasSubstr("transfers[0]: expected {\"bytes\":576,\"from\":0,\"producer\":\"a\",\"to\":1} "
                "(3 copies follow from device_of at batch size 1)"));
  // Without the list, it is derived.
  EXPECT_NO_THROW(
      WriteAndLoad(TwoChains(), ChainsOnTwoDevices(), [](json& doc) { doc.erase("transfers"); }));
}

TEST_F(MultiScheduleTest, WritingRefusesAScheduleWithoutDeviceNames) {
  const Graph g = TwoChains();
  const MultiDeviceSchedule q = SingletonMultiSchedule(g, {-1, 0, 1, 1, 0, 0}, 2);
  EXPECT_THAT([&] { MultiScheduleToJson(g, q, {}); },
              ::testing::ThrowsMessage<Error>(HasSubstr("devices[0]: empty name")));
}

}  // namespace
}  // namespace ios::coordinator
