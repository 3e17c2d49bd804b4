#include "common/ios_json.h"

#include <gtest/gtest.h>

#include "common/error.h"
#include "tests/testing/paths.h"

namespace ios {
namespace {

using ::ios::testing::SharedFixture;

class IosJsonFixtureTest : public ::testing::TestWithParam<std::string> {};

TEST_P(IosJsonFixtureTest, ReferenceFileLoadsAndRoundTripsUnchanged) {
  const std::string path = SharedFixture("ios-reference/" + GetParam());
  IOS_REQUIRE_FIXTURE(path);
  const IosModel model = LoadIosJson(path);
  EXPECT_GT(model.graph.OperatorCount(), 0);
  const IosModel again = ParseIosJson(ToIosJson(model.graph, model.stages), "round-trip");
  std::string diff;
  EXPECT_TRUE(StructurallyEqual(model.graph, again.graph, &diff)) << diff;
  EXPECT_EQ(model.stages, again.stages);
  for (size_t i = 0; i < model.graph.nodes.size(); ++i) {
    EXPECT_EQ(model.graph.nodes[i].name, again.graph.nodes[i].name);
  }
}

INSTANTIATE_TEST_SUITE_P(
    AllFixtures, IosJsonFixtureTest,
    ::testing::Values("models/inception_v3.json", "models/squeezenet.json", "models/nasnet.json",
                      "models/randwire.json", "schedules/inception_v3_bs1.json",
                      "schedules/inception_v3_bs16.json", "schedules/inception_v3_bs32.json",
                      "schedules/inception_v3_bs64.json", "schedules/inception_v3_bs128.json",
                      "schedules/inception_v3_k80_bs1.json",
                      "schedules/inception_v3_v100_bs1.json"));

TEST(IosJsonTest, ScheduleFixturesCarryStagesForEveryBlock) {
  const std::string path = SharedFixture("ios-reference/schedules/inception_v3_bs1.json");
  IOS_REQUIRE_FIXTURE(path);
  const IosModel model = LoadIosJson(path);
  EXPECT_TRUE(model.HasSchedule());
  ASSERT_EQ(model.stages.size(), model.graph.blocks.size());
  for (const auto& block_stages : model.stages) EXPECT_FALSE(block_stages.empty());
}

const char* kTiny = R"({
  "name": "tiny",
  "input": {"type": "placeholder", "name": "in", "output_shape": [3, 8, 8]},
  "blocks": [{
    "enter_name": "in",
    "enter_node": {"type": "placeholder", "name": "in", "output_shape": [3, 8, 8]},
    "inner_nodes": [
      {"type": "conv", "name": "a", "inputs": [[["in", 0, 3]]], "out_channels": 4,
       "kernel": [3, 3], "stride": [1, 1], "padding": [1, 1], "groups": 1, "act": "relu"},
      {"type": "sequential", "name": "s", "nodes": [
        {"type": "relu", "name": "s0", "inputs": [[["in", 0, 3]]]},
        {"type": "conv", "name": "s1", "inputs": [[["s0", 0, 3]]], "out_channels": 4,
         "kernel": [1, 1], "stride": [1, 1], "padding": [0, 0], "groups": 1, "act": "identity"}]}
    ],
    "exit_node": {"type": "identity", "name": "out", "inputs": [[["a", 0, 4], ["s", 0, 4]], [["a", 0, 2]]]}
  }]
})";

TEST(IosJsonTest, ParsesSequentialAndSummedTerms) {
  const IosModel model = ParseIosJson(kTiny, "tiny.json");
  const Graph& g = model.graph;
  ASSERT_EQ(g.nodes.size(), 4u);
  EXPECT_EQ(g.node(2).op.kind, OpKind::kSequential);
  EXPECT_EQ(g.node(2).op.chain.size(), 2u);
  EXPECT_EQ(g.node(3).output, (Shape{6, 8, 8}));
  EXPECT_FALSE(model.HasSchedule());
}

struct BadJsonCase {
  std::string label, from, to, message;
};

class IosJsonErrorTest : public ::testing::TestWithParam<BadJsonCase> {};

TEST_P(IosJsonErrorTest, RejectsWithMessageNamingTheProblem) {
  const BadJsonCase& c = GetParam();
  std::string text = kTiny;
  const auto pos = text.find(c.from);
  ASSERT_NE(pos, std::string::npos) << c.from;
  text.replace(pos, c.from.size(), c.to);
  try {
    ParseIosJson(text, "tiny.json");
    FAIL() << "expected an error for " << c.label;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tiny.json"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(c.message), std::string::npos) << e.what();
  }
}

INSTANTIATE_TEST_SUITE_P(
    Cases, IosJsonErrorTest,
    ::testing::Values(
        BadJsonCase{"unknown producer", R"([["in", 0, 3]]], "out_channels")",
                    R"([["nope", 0, 3]]], "out_channels")", "unknown producer 'nope'"},
        BadJsonCase{"slice out of range", R"("inputs": [[["a", 0, 4], ["s", 0, 4]], [["a", 0, 2]]])",
                    R"("inputs": [[["a", 0, 9]]])", "out of range"},
        BadJsonCase{"channel mismatch in sum", R"([["a", 0, 4], ["s", 0, 4]])",
                    R"([["a", 0, 4], ["s", 0, 3]])", "summed slices differ"},
        BadJsonCase{"empty output", R"("kernel": [3, 3], "stride": [1, 1], "padding": [1, 1])",
                    R"("kernel": [11, 11], "stride": [1, 1], "padding": [0, 0])", "empty height"},
        BadJsonCase{"unknown type", R"("type": "identity")", R"("type": "frobnicate")",
                    "unknown operator type"},
        BadJsonCase{"missing field", R"("out_channels": 4,
       "kernel")",
                    R"("kernel")", "out_channels: missing field"},
        BadJsonCase{"not json", R"("name": "tiny")", R"("name": )", "not valid JSON"},
        BadJsonCase{"stored shape disagrees", R"("name": "out",)",
                    R"("name": "out", "output_shape": [6, 4, 4],)", "output_shape"},
        BadJsonCase{"groups do not divide", R"("groups": 1, "act": "relu")",
                    R"("groups": 2, "act": "relu")", "groups"}),
    [](const auto& param_info) {
      std::string name = param_info.param.label;
      for (char& ch : name) ch = std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
      return name;
    });

TEST(IosJsonTest, MissingFileIsAClearError) {
  EXPECT_THROW(LoadIosJson("/nonexistent/model.json"), Error);
}

}  // namespace
}  // namespace ios
