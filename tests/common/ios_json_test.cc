#include "common/ios_json.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "common/error.h"
#include "common/zoo.h"
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
        BadJsonCase{"slice out of range",
                    R"("inputs": [[["a", 0, 4], ["s", 0, 4]], [["a", 0, 2]]])",
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

// ---- Models no worker can measure (common/limits.h) ----

// A one-block model: input `in` of `input_shape`, then `inner` (JSON node
// objects, comma-separated) and an identity exit `out` reading `exit_reads`.
std::string OneBlockModel(const std::string& input_shape, const std::string& inner,
                          const std::string& exit_reads) {
  const std::string in =
      R"({"type": "placeholder", "name": "in", "output_shape": )" + input_shape + "}";
  return R"({"name": "m", "input": )" + in + R"(, "blocks": [{"enter_name": "in", "enter_node": )" +
         in + R"(, "inner_nodes": [)" + inner +
         R"(], "exit_node": {"type": "identity", "name": "out", "inputs": )" + exit_reads + "}}]}";
}

std::string ErrorOf(const std::string& text, const std::string& source = "m.json") {
  try {
    ParseIosJson(text, source);
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected an error";
  return {};
}

#define EXPECT_CONTAINS(text, fragment) \
  EXPECT_NE(std::string(text).find(fragment), std::string::npos) << (text)

TEST(IosJsonLimitTest, ConvWith65537OutputChannelsIsRefusedNamingTheNode) {
  const std::string conv = R"({"type": "conv", "name": "wide", "inputs": [[["in", 0, 3]]],
      "out_channels": 65537, "kernel": [1, 1], "stride": [1, 1], "padding": [0, 0]})";
  const std::string e = ErrorOf(OneBlockModel("[3, 8, 8]", conv, R"([[["wide", 0, 8]]])"));
  EXPECT_CONTAINS(e, "m.json: node 'wide': out_channels: 65537 exceeds the limit of 65536");
}

TEST(IosJsonLimitTest, Input70000HighIsRefusedNamingTheNode) {
  const std::string e = ErrorOf(OneBlockModel("[3, 70000, 8]", "", R"([[["in", 0, 3]]])"));
  EXPECT_CONTAINS(e, "m.json: input 'in': output_shape: height 70000 exceeds the limit of 65536");
}

TEST(IosJsonLimitTest, ConcatOf1025TermsIsRefusedNamingTheNode) {
  std::string terms = "[";
  for (int i = 0; i < 1025; ++i) terms += std::string(i ? ", " : "") + R"([["in", 0, 1]])";
  terms += "]";
  const std::string e = ErrorOf(OneBlockModel("[3, 8, 8]", "", terms));
  EXPECT_CONTAINS(e,
                  "m.json: node 'out': inputs: number of concatenated terms 1025 exceeds the "
                  "limit of 1024");
}

TEST(IosJsonLimitTest, SequentialOf65StepsIsRefusedNamingTheNode) {
  std::string steps;
  for (int i = 0; i < 65; ++i) {
    const std::string reads = i == 0 ? "in" : "s" + std::to_string(i - 1);
    steps += std::string(i ? ", " : "") + R"({"type": "relu", "name": "s)" + std::to_string(i) +
             R"(", "inputs": [[[")" + reads + R"(", 0, 3]]]})";
  }
  const std::string seq = R"({"type": "sequential", "name": "deep", "nodes": [)" + steps + "]}";
  const std::string e = ErrorOf(OneBlockModel("[3, 8, 8]", seq, R"([[["deep", 0, 3]]])"));
  EXPECT_CONTAINS(e,
                  "m.json: node 'deep': nodes: number of sequential steps 65 exceeds the limit "
                  "of 64");
}

TEST(IosJsonLimitTest, ModelsAtTheLimitsLoad) {
  const std::string conv = R"({"type": "conv", "name": "wide", "inputs": [[["in", 0, 3]]],
      "out_channels": 65536, "kernel": [1, 1], "stride": [1, 1], "padding": [0, 0]})";
  EXPECT_NO_THROW(ParseIosJson(OneBlockModel("[3, 2, 65536]", conv, R"([[["wide", 0, 8]]])"), "m"));
}

// ---- Block structure (issue 7, item 7) ----

TEST(IosJsonBlockTest, SecondSinkInABlockIsRefusedNamingTheNode) {
  const std::string dead = R"({"type": "relu", "name": "dead", "inputs": [[["in", 0, 3]]]},
      {"type": "relu", "name": "live", "inputs": [[["in", 0, 3]]]})";
  const std::string e = ErrorOf(OneBlockModel("[3, 8, 8]", dead, R"([[["live", 0, 3]]])"));
  EXPECT_CONTAINS(e, "m.json: block 0: node 'dead': a second sink");
}

TEST(IosJsonBlockTest, ExitReadingNoneOfTheBlockIsRefused) {
  const std::string inner = R"({"type": "relu", "name": "r", "inputs": [[["in", 0, 3]]]})";
  const std::string e = ErrorOf(OneBlockModel("[3, 8, 8]", inner, R"([[["in", 0, 3]]])"));
  EXPECT_CONTAINS(e, "m.json: block 0: exit_node 'out': reads none of the block's operators");
}

// ---- Model files (issue 7, item 8) ----

std::string Replaced(std::string text, const std::string& from, const std::string& to) {
  const auto pos = text.find(from);
  EXPECT_NE(pos, std::string::npos) << from;
  if (pos != std::string::npos) text.replace(pos, from.size(), to);
  return text;
}

TEST(IosJsonFileTest, MissingTopLevelNameTakesTheFileStem) {
  const std::string text = Replaced(kTiny, R"("name": "tiny",)", "");
  EXPECT_EQ(ParseIosJson(text, "models/my_net.json").graph.name, "my_net");
  EXPECT_EQ(ParseIosJson(kTiny, "models/my_net.json").graph.name, "tiny");
}

TEST(IosJsonFileTest, EnterNodeContradictingEnterNameIsRefused) {
  const std::string text = Replaced(kTiny, R"("enter_node": {"type": "placeholder", "name": "in")",
                                    R"("enter_node": {"type": "placeholder", "name": "other")");
  EXPECT_CONTAINS(ErrorOf(text, "tiny.json"),
                  "tiny.json: blocks[0].enter_node.name: 'other' contradicts enter_name 'in'");
}

TEST(IosJsonFileTest, NumberTooLargeNamesFileLineNodeAndField) {
  const std::string text = Replaced(kTiny, R"("out_channels": 4)", R"("out_channels": 1e400)");
  const std::string e = ErrorOf(text, "tiny.json");
  EXPECT_CONTAINS(e, "tiny.json:8:");
  EXPECT_CONTAINS(e, "blocks[0].inner_nodes[0] ('a').out_channels: number 1e400 is too large");
  EXPECT_EQ(e.find("[json.exception"), std::string::npos) << e;
}

TEST(IosJsonFileTest, NonBooleanBiasNamesNodeFieldAndExpectation) {
  const std::string text = Replaced(kTiny, R"("groups": 1, "act": "relu")",
                                    R"("groups": 1, "bias": "yes", "act": "relu")");
  EXPECT_CONTAINS(ErrorOf(text, "tiny.json"),
                  "tiny.json: blocks[0].inner_nodes[0] ('a').bias: expected true or false, got "
                  "\"yes\"");
}

TEST(IosJsonFileTest, IntegerOutOfRangeNamesTheField) {
  const std::string text =
      Replaced(kTiny, R"("out_channels": 4)", R"("out_channels": 99999999999)");
  EXPECT_CONTAINS(ErrorOf(text, "tiny.json"),
                  "('a').out_channels: 99999999999 is out of range (expected an integer");
}

TEST(IosJsonFileTest, EmptyNodeNameIsReportedAtItsPosition) {
  const std::string text = Replaced(kTiny, R"("name": "a")", R"("name": "")");
  EXPECT_CONTAINS(ErrorOf(text, "tiny.json"), "tiny.json: blocks[0].inner_nodes[0].name: empty");
}

TEST(IosJsonFileTest, HugePaddingIsRefusedBlamingPadding) {
  const std::string text = Replaced(kTiny, R"("padding": [1, 1])", R"("padding": [1073741824, 1])");
  EXPECT_CONTAINS(ErrorOf(text, "tiny.json"),
                  "tiny.json: node 'a': padding: height 1073741824 exceeds the limit of 65536");
}

TEST(IosJsonFileTest, HugeDilationIsRefusedBlamingDilation) {
  const std::string text =
      Replaced(kTiny, R"("padding": [1, 1])", R"("padding": [1, 1], "dilation": [1, 1073741824])");
  EXPECT_CONTAINS(ErrorOf(text, "tiny.json"),
                  "tiny.json: node 'a': dilation: width 1073741824 exceeds the limit of 65536");
}

TEST(IosJsonFileTest, NamesWithControlCharactersAreEscapedInMessages) {
  // A node whose name holds a newline and a terminal escape, read as an
  // unknown producer: the message shows them escaped, on one line.
  const std::string text = Replaced(kTiny, R"([["in", 0, 3]]], "out_channels")",
                                    R"([["x\n\u001b[2Jy", 0, 3]]], "out_channels")");
  const std::string e = ErrorOf(text, "tiny.json");
  EXPECT_CONTAINS(e, R"(unknown producer 'x\n\x1b[2Jy')");
  EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  EXPECT_EQ(e.find('\x1b'), std::string::npos) << e;
}

class TempDir {
 public:
  TempDir() {
    path_ =
        std::filesystem::temp_directory_path() / ("ios_json_test_" + std::to_string(::getpid()));
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  std::string operator/(const std::string& name) const { return (path_ / name).string(); }
  std::string path() const { return path_.string(); }

 private:
  std::filesystem::path path_;
};

std::string LoadError(const std::string& path) {
  try {
    LoadIosJson(path);
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected an error loading " << path;
  return {};
}

TEST(IosJsonFileTest, DirectoryFifoAndDeviceAreRefusedUnread) {
  TempDir dir;
  EXPECT_CONTAINS(LoadError(dir.path()), "not a regular file (a directory)");
  const std::string fifo = dir / "model.fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_CONTAINS(LoadError(fifo), "not a regular file (a FIFO)");  // must not block
  EXPECT_CONTAINS(LoadError("/dev/zero"), "/dev/zero: not a regular file (a character device)");
  EXPECT_CONTAINS(LoadError(dir / "absent.json"), "cannot open file");
}

TEST(IosJsonFileTest, FileLargerThanTheCapIsRefusedUnread) {
  TempDir dir;
  const std::string big = dir / "big.json";
  { std::ofstream(big) << " "; }
  std::filesystem::resize_file(big, kMaxModelFileBytes + 1);  // sparse: costs no disk
  EXPECT_CONTAINS(LoadError(big), "67108865 bytes, more than the 64 MiB a model file may have");
}

TEST(IosJsonFileTest, FileUnderTheCapLoads) {
  TempDir dir;
  const std::string path = dir / "tiny.json";
  { std::ofstream(path) << kTiny; }
  EXPECT_EQ(LoadIosJson(path).graph.OperatorCount(), 3);
}

// Our own JSON keeps the graph's parts: every zoo model written and read back
// has the same blocks, parts and names.
class ZooRoundTripTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ZooRoundTripTest, WrittenAndReadBackKeepsBlocksPartsAndNames) {
  const Graph graph = BuildZooModel(GetParam());
  const IosModel again = ParseIosJson(ToIosJson(graph), GetParam() + ".json");
  std::string diff;
  EXPECT_TRUE(StructurallyEqual(graph, again.graph, &diff)) << diff;
  EXPECT_EQ(again.graph.name, graph.name);
  ASSERT_EQ(again.graph.blocks.size(), graph.blocks.size());
  for (size_t b = 0; b < graph.blocks.size(); ++b) {
    EXPECT_EQ(again.graph.blocks[b].parts, graph.blocks[b].parts) << "block " << b;
  }
  ASSERT_EQ(again.graph.nodes.size(), graph.nodes.size());
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    EXPECT_EQ(again.graph.nodes[i].name, graph.nodes[i].name);
  }
}

INSTANTIATE_TEST_SUITE_P(Zoo, ZooRoundTripTest,
                         ::testing::Values("inception_v3", "squeezenet", "nasnet", "randwire"));

TEST(IosJsonTest, NasNetKeepsItsTwentyFivePartsThroughOurJson) {
  const Graph graph = BuildZooModel("nasnet");
  const IosModel again = ParseIosJson(ToIosJson(graph), "nasnet.json");
  ASSERT_EQ(again.graph.blocks.size(), 1u);
  EXPECT_EQ(again.graph.blocks[0].parts.size(), 25u);
}

TEST(IosJsonTest, PartsNamingUnknownNodesAreRefused) {
  const std::string text =
      Replaced(kTiny, R"("exit_node")", R"("parts": [["a", "nope"]], "exit_node")");
  EXPECT_CONTAINS(ErrorOf(text, "tiny.json"),
                  "tiny.json: blocks[0].parts[0][1]: unknown node 'nope'");
}

// The search cuts a block at part boundaries and runs the parts in the
// order listed, so a part reading a later part's output has no valid schedule.
TEST(IosJsonTest, PartReadingALaterPartIsRefusedNamingPartNodeAndProducer) {
  const std::string text =
      Replaced(kTiny, R"("exit_node")", R"("parts": [["out"], ["a", "s"]], "exit_node")");
  EXPECT_CONTAINS(ErrorOf(text, "tiny.json"),
                  "tiny.json: block 0: parts[0]: node 'out' reads 'a' from the later part 1");
}

TEST(IosJsonTest, PartsInDependencyOrderLoad) {
  const std::string text =
      Replaced(kTiny, R"("exit_node")", R"("parts": [["s", "a"], ["out"]], "exit_node")");
  EXPECT_EQ(ParseIosJson(text, "tiny.json").graph.blocks[0].parts.size(), 2u);
}

}  // namespace
}  // namespace ios
