// The schedule file: what ios-coordinator --out writes and --evaluate reads,
// including IOS reference schedules and the malformed ones it must refuse.
#include "coordinator/schedule_json.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/ios_json.h"
#include "common/zoo.h"
#include "db/profile_store.h"
#include "tests/coordinator/search_testing.h"
#include "tests/testing/paths.h"

namespace ios::coordinator {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::CountingMeasurer;
using testing::DefaultOptions;
using testing::StagesOf;
using testing::TempDirTest;

// ---------------------------------------------------------- schedule files

using ::ios::testing::ReadFile;

void WriteFile(const std::string& path, const std::string& text) {
  ASSERT_TRUE(::ios::testing::WriteFile(path, text)) << path;
}

ScheduleInfo InfoFor(const SearchOutcome& outcome) {
  return {outcome.model,
          outcome.device,
          outcome.options.batch_size,
          outcome.options,
          outcome.sequential.latency_ms,
          outcome.greedy.latency_ms};
}

TEST_F(TempDirTest, ScheduleFileRoundTripsStagesAndGraph) {
  const Graph g = BuildZooModel("squeezenet");
  auto store = db::ProfileStore::Open(":memory:");
  CountingMeasurer measurer;
  const SearchOutcome outcome = RunSearch(g, "squeezenet", DefaultOptions(), *store, measurer);
  const std::string path = PathIn("schedule.json");
  WriteFile(path, ScheduleToJson(g, outcome.ios, InfoFor(outcome)));

  const json doc = json::parse(ReadFile(path));
  EXPECT_EQ(doc.at("format"), "ios-farm-schedule");
  EXPECT_EQ(doc.at("model"), "squeezenet");
  EXPECT_EQ(doc.at("batch_size"), 1);
  EXPECT_NEAR(doc.at("latency_ms").get<double>(), outcome.ios.latency_ms, 1e-9);

  const LoadedSchedule loaded = LoadSchedule(path);
  EXPECT_EQ(loaded.origin, "ios-farm");
  std::string difference;
  EXPECT_TRUE(StructurallyEqual(loaded.graph, g, &difference)) << difference;
  ASSERT_EQ(loaded.graph.nodes.size(), g.nodes.size());
  for (size_t i = 0; i < g.nodes.size(); ++i)
    EXPECT_EQ(loaded.graph.nodes[i].name, g.nodes[i].name);
  EXPECT_EQ(StagesOf(loaded.blocks), StagesOf(outcome.ios));
}

// ios-run prices a schedule file under the settings of the search that
// wrote it, protocol included; a file from before protocols were recorded
// was measured isolated.
TEST_F(TempDirTest, ScheduleFileRecordsTheStageProtocolOfARealDevicesSearch) {
  const Graph g = BuildZooModel("squeezenet");
  auto store = db::ProfileStore::Open(":memory:");
  CountingMeasurer measurer;
  SearchOutcome outcome = RunSearch(g, "squeezenet", DefaultOptions(), *store, measurer);
  outcome.device.simulated = false;  // a sim's settings are not read back
  outcome.options.settings.protocol = StageProtocol::kExecuted;
  outcome.options.settings.warm_weights = true;
  const std::string path = PathIn("schedule.json");
  WriteFile(path, ScheduleToJson(g, outcome.ios, InfoFor(outcome)));
  std::optional<MeasureSettings> settings = LoadSchedule(path).settings;
  ASSERT_TRUE(settings.has_value());
  EXPECT_EQ(settings->Key(), outcome.options.settings.Key());

  json doc = json::parse(ReadFile(path));
  doc["settings"].erase("protocol");
  doc["settings"].erase("warm_weights");
  WriteFile(path, doc.dump());
  settings = LoadSchedule(path).settings;
  ASSERT_TRUE(settings.has_value());
  EXPECT_EQ(settings->protocol, StageProtocol::kIsolated);
  EXPECT_FALSE(settings->warm_weights);

  doc["settings"]["protocol"] = "replayed";
  WriteFile(path, doc.dump());
  try {
    LoadSchedule(path);
    ADD_FAILURE() << "an unknown protocol loaded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("settings.protocol: 'replayed'"), std::string::npos)
        << e.what();
  }
}

TEST(ScheduleFileTest, LoadsTheIosReferenceScheduleOfInceptionV3) {
  const std::string path = IOS_SHARED_DIR "/fixtures/ios-reference/schedules/inception_v3_bs1.json";
  IOS_REQUIRE_FIXTURE(path);
  const LoadedSchedule loaded = LoadSchedule(path);
  EXPECT_EQ(loaded.origin, "ios-reference");
  ASSERT_EQ(loaded.blocks.size(), loaded.graph.blocks.size());
  std::vector<int> count(loaded.graph.nodes.size(), 0);
  for (size_t b = 0; b < loaded.blocks.size(); ++b) {
    const std::vector<NodeId> ops = loaded.graph.blocks[b].Operators();
    for (const Stage& stage : loaded.blocks[b]) {
      for (const auto& group : stage.groups) {
        for (NodeId id : group) {
          ++count.at(id);
          EXPECT_NE(std::find(ops.begin(), ops.end(), id), ops.end())
              << loaded.graph.node(id).name << " outside block " << b;
        }
      }
    }
  }
  EXPECT_EQ(count[0], 0);
  for (size_t id = 1; id < count.size(); ++id) {
    EXPECT_EQ(count[id], 1) << loaded.graph.node(static_cast<NodeId>(id)).name;
  }
  // Every stage of the reference schedule can be keyed.
  StageKeyer keyer(loaded.graph);
  for (const auto& block : loaded.blocks) {
    for (const Stage& stage : block)
      EXPECT_EQ(keyer.Key(stage), MakeStageSpec(loaded.graph, stage).Key());
  }
}

// A sequential schedule of squeezenet on disk, edited one way per case.
struct BadScheduleCase {
  std::string label;
  std::function<void(json&)> edit;
  std::string message;  // fragment the error must contain
};
void PrintTo(const BadScheduleCase& c, std::ostream* os) { *os << c.label; }

// Index of the block and stage that hold operator `name`.
std::pair<size_t, size_t> FindStage(const json& doc, const std::string& name) {
  const json& blocks = doc.at("blocks");
  for (size_t b = 0; b < blocks.size(); ++b) {
    const json& stages = blocks[b].at("stages");
    for (size_t s = 0; s < stages.size(); ++s) {
      for (const json& group : stages[s].at("groups")) {
        for (const json& n : group) {
          if (n == name) return {b, s};
        }
      }
    }
  }
  throw Error("test: no stage holds " + name);
}

json& StageHolding(json& doc, const std::string& name) {
  const auto [b, s] = FindStage(doc, name);
  return doc["blocks"][b]["stages"][s];
}

void EraseStageOf(json& doc, const std::string& name) {
  const auto [b, s] = FindStage(doc, name);
  doc["blocks"][b]["stages"].erase(s);
}

class BadScheduleTest : public ::testing::TestWithParam<BadScheduleCase> {
 protected:
  static void SetUpTestSuite() {
    const Graph g = BuildZooModel("squeezenet");
    auto store = db::ProfileStore::Open(":memory:");
    CountingMeasurer measurer;
    const SearchOutcome outcome = RunSearch(g, "squeezenet", DefaultOptions(), *store, measurer);
    sequential_json_ = ScheduleToJson(g, outcome.sequential, InfoFor(outcome));
  }
  void SetUp() override { ASSERT_FALSE(temp_.path().empty()) << "cannot make a temp dir"; }

  static inline std::string sequential_json_;
  ::ios::testing::TempDir temp_{"ios_bad_schedule"};
  const fs::path& dir_ = temp_.path();
};

TEST_P(BadScheduleTest, LoadScheduleRejectsItNamingFileAndProblem) {
  const BadScheduleCase& c = GetParam();
  json doc = json::parse(sequential_json_);
  c.edit(doc);
  const std::string path = (dir_ / "bad_schedule.json").string();
  WriteFile(path, doc.dump(1));
  try {
    LoadSchedule(path);
    FAIL() << c.label << ": expected an ios::Error containing '" << c.message << "'";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(path), std::string::npos) << what;
    EXPECT_NE(what.find(c.message), std::string::npos) << c.label << ": " << what;
  }
}

TEST_P(BadScheduleTest, UneditedScheduleLoads) {
  // The base of every case is valid: only the edit makes it bad.
  const std::string path = (dir_ / "good_schedule.json").string();
  WriteFile(path, sequential_json_);
  EXPECT_NO_THROW(LoadSchedule(path));
}

INSTANTIATE_TEST_SUITE_P(
    Edits, BadScheduleTest,
    ::testing::Values(
        BadScheduleCase{"missing_operator", [](json& d) { EraseStageOf(d, "fire3.squeeze"); },
                        "'fire3.squeeze' is in no stage"},
        BadScheduleCase{"duplicated_operator",
                        [](json& d) {
                          const json copy = StageHolding(d, "fire3.squeeze");
                          d["blocks"][FindStage(d, "fire3.squeeze").first]["stages"].push_back(
                              copy);
                        },
                        "'fire3.squeeze' is scheduled twice"},
        BadScheduleCase{"operator_twice_in_one_group",
                        [](json& d) {
                          StageHolding(d, "fire3.squeeze")["groups"][0].push_back("fire3.squeeze");
                        },
                        "'fire3.squeeze' is scheduled twice"},
        BadScheduleCase{
            "unknown_operator",
            [](json& d) { StageHolding(d, "fire3.squeeze")["groups"][0][0] = "no_such_op"; },
            "unknown operator 'no_such_op'"},
        BadScheduleCase{"the_input_is_not_an_operator",
                        [](json& d) {
                          const std::string input = d["graph"]["input"]["name"];
                          StageHolding(d, "fire3.squeeze")["groups"][0].push_back(input);
                        },
                        "unknown operator"},
        BadScheduleCase{"consumer_before_producer",
                        [](json& d) {
                          const auto [b, s] = FindStage(d, "fire3.squeeze");
                          const json stage = d["blocks"][b]["stages"][s];
                          d["blocks"][b]["stages"].erase(s);
                          d["blocks"][b]["stages"].push_back(stage);
                        },
                        "does not run after its producer 'fire3.squeeze'"},
        BadScheduleCase{"consumer_concurrent_with_producer",
                        [](json& d) {
                          EraseStageOf(d, "fire3.expand3x3");
                          StageHolding(d, "fire3.squeeze")["groups"].push_back({"fire3.expand3x3"});
                        },
                        "fire3.expand3x3"},
        BadScheduleCase{"operator_in_another_block",
                        [](json& d) {
                          const size_t b = FindStage(d, "fire3.squeeze").first;
                          const json stage = d["blocks"][b - 1]["stages"].back();
                          d["blocks"][b - 1]["stages"].erase(d["blocks"][b - 1]["stages"].size() -
                                                             1);
                          d["blocks"][b]["stages"].insert(d["blocks"][b]["stages"].begin(), stage);
                        },
                        "'fire2'"},
        BadScheduleCase{"unknown_strategy",
                        [](json& d) { StageHolding(d, "fire3.squeeze")["strategy"] = "fancy"; },
                        "unknown strategy 'fancy'"},
        BadScheduleCase{"unmergeable_merge",
                        [](json& d) {
                          EraseStageOf(d, "fire3.expand3x3");
                          json& stage = StageHolding(d, "fire3.squeeze");
                          stage["strategy"] = "merge";
                          stage["groups"].push_back({"fire3.expand3x3"});
                        },
                        "cannot be merged"},
        BadScheduleCase{
            "empty_group",
            [](json& d) { StageHolding(d, "fire3.squeeze")["groups"].push_back(json::array()); },
            "empty group"},
        BadScheduleCase{"block_missing", [](json& d) { d["blocks"].erase(d["blocks"].size() - 1); },
                        "scheduled blocks for a graph of"},
        BadScheduleCase{"graph_missing", [](json& d) { d.erase("graph"); }, "graph: missing field"},
        BadScheduleCase{"groups_not_a_list",
                        [](json& d) { StageHolding(d, "fire3.squeeze")["groups"] = 7; },
                        "unexpected structure"}),
    [](const auto& param_info) { return param_info.param.label; });

TEST_F(TempDirTest, LoadScheduleRejectsFilesThatAreNoSchedule) {
  const std::string model = PathIn("model.json");
  WriteFile(model, ToIosJson(BuildZooModel("squeezenet")));
  const std::string garbage = PathIn("garbage.json");
  WriteFile(garbage, "{\"format\": \"ios-farm-schedule\", \"blocks\": [");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {model, "no stages to evaluate"},
      {garbage, "not valid JSON"},
      {PathIn("absent.json"), "cannot open"},
  };
  for (const auto& [path, fragment] : cases) {
    try {
      LoadSchedule(path);
      ADD_FAILURE() << path << ": expected an error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    }
  }
}

// Before: LoadSchedule read whatever it was given to the end: a directory or
// /dev/null came back as "not valid JSON", a file over the model loader's
// bound was read whole (and /dev/zero grew without bound, a FIFO blocked).
// Now it shares the model loader's checks (ReadJsonInputFile).
TEST_F(TempDirTest, LoadScheduleRefusesWhatTheModelLoaderRefuses) {
  const std::string huge = PathIn("huge.json");
  WriteFile(huge, "");
  fs::resize_file(huge, kMaxModelFileBytes + 1);  // sparse: costs no disk
  const std::string directory = PathIn("a_directory");
  fs::create_directory(directory);
  const std::vector<std::pair<std::string, std::string>> cases = {
      {huge, "MiB a schedule file may have"},
      {directory, "not a regular file (a directory)"},
      {"/dev/null", "not a regular file (a character device)"},
  };
  for (const auto& [path, fragment] : cases) {
    try {
      LoadSchedule(path);
      ADD_FAILURE() << path << ": expected an error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace ios::coordinator
