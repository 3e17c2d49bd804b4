// Stage keys are DB keys: a key that changes silently orphans every stored
// measurement. These cases pin one key per operator kind, plus merge,
// sequential, sliced, summed and concatenated inputs, to
// tests/data/golden/stage_keys.txt. A deliberate change is re-recorded with
// IOS_UPDATE_GOLDENS=1 (tests/testing/golden.h) and needs a new key version.
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "common/error.h"
#include "common/graph.h"
#include "common/stage.h"
#include "common/stage_key.h"
#include "tests/testing/golden.h"
#include "tests/testing/ops.h"

namespace ios {
namespace {

using ::ios::testing::ActOp;
using ::ios::testing::ConvOp;
using ::ios::testing::EltwiseOp;
using ::ios::testing::IdentityOp;
using ::ios::testing::PoolOp;
using ::ios::testing::SequentialOp;

// One graph holding every case; it has no blocks (keys need only shapes).
class KeyGraph {
 public:
  KeyGraph() {
    Node in{"in", "", {}, {}, {16, 32, 32}};
    in.op.kind = OpKind::kInput;
    graph_.nodes.push_back(in);
  }
  NodeId Add(const std::string& name, OpParams op, Inputs inputs) {
    graph_.nodes.push_back({name, "", std::move(op), std::move(inputs), {}});
    return static_cast<NodeId>(graph_.nodes.size()) - 1;
  }
  Graph& Finish() {
    InferShapes(graph_);
    return graph_;
  }

 private:
  Graph graph_;
};

// The DB keeps keys only: ParseStageKey must give back the whole spec.
void ExpectParsesBack(const StageSpec& spec, const std::string& label) {
  const StageSpec parsed = ParseStageKey(spec.Key());
  EXPECT_EQ(parsed.Key(), spec.Key()) << label;
  EXPECT_EQ(parsed.Describe(), spec.Describe()) << label;
  EXPECT_EQ(parsed.externals, spec.externals) << label;
  ASSERT_EQ(parsed.groups.size(), spec.groups.size()) << label;
  for (size_t g = 0; g < spec.groups.size(); ++g) {
    ASSERT_EQ(parsed.groups[g].size(), spec.groups[g].size()) << label;
    for (size_t k = 0; k < spec.groups[g].size(); ++k) {
      EXPECT_EQ(parsed.groups[g][k].op, spec.groups[g][k].op) << label;
      EXPECT_EQ(parsed.groups[g][k].inputs, spec.groups[g][k].inputs) << label;
      EXPECT_EQ(parsed.groups[g][k].output, spec.groups[g][k].output) << label;
    }
  }
}

TEST(StageKeyParseTest, MalformedKeysAreRefusedWithTheirPosition) {
  const std::string good = "v1;parallel;in=16x32x32,;g=act(relu)<X0[0:16]+|>";
  EXPECT_EQ(ParseStageKey(good).Key(), good);
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"", "expected 'v1;'"},
      {"v2;parallel;in=;g=id<|>", "byte 0: expected 'v1;'"},
      {"v1;sideways;in=16x32x32,;g=act(relu)<X0[0:16]+|>", "expected a strategy"},
      {"v1;parallel;in=16x32,;g=act(relu)<X0[0:16]+|>", "byte 20: expected 'x'"},
      {"v1;parallel;in=16x32x32,", "expected a group"},
      {"v1;parallel;in=16x32x32,;g=act(swish)<X0[0:16]+|>", "expected an activation"},
      {"v1;parallel;in=16x32x32,;g=softmax<X0[0:16]+|>", "expected an operator"},
      {"v1;parallel;in=16x32x32,;g=act(relu)<X0[0:16]|>", "expected ']+'"},
      {"v1;parallel;in=16x32x32,;g=act(relu)<X0[0:16]+", "at the end"},
      {"v1;parallel;in=16x32x32,;g=act(relu)<X3[0:16]+|>", "group 0 op 0"},
      {"v1;parallel;in=16x32x32,;g=act(relu)<X0[0:99]+|>", "group 0 op 0"},
  };
  for (const auto& [key, message] : bad) {
    try {
      ParseStageKey(key);
      ADD_FAILURE() << "accepted: " << key;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos)
          << key << "\n said: " << e.what();
    }
  }
}

struct KeyCase {
  std::string label;
  Stage stage;
};

TEST(StageKeyGoldenTest, KeysOfEveryKindOfStageMatchTheRecordedOnes) {
  KeyGraph k;
  const Term whole{{0, 0, 16}};
  OpParams dilated = ConvOp(8, 3, 1, 2, Activation::kNone);
  dilated.conv.dilation = {2, 2};
  dilated.conv.bias = false;
  const NodeId conv3 = k.Add("conv3", ConvOp(8, 3, 1, 1), {whole});
  const NodeId conv1 = k.Add("conv1", ConvOp(8, 1, 1, 0), {whole});
  const NodeId depthwise = k.Add("dw", ConvOp(16, 3, 2, 1, Activation::kRelu, 16), {whole});
  const NodeId conv_dilated = k.Add("dilated", dilated, {whole});
  const NodeId max_pool = k.Add("maxpool", PoolOp(PoolType::kMax, 3, 2, 1), {whole});
  const NodeId avg_pool = k.Add("avgpool", PoolOp(PoolType::kAvg, 3, 1, 1), {whole});
  const NodeId global_pool = k.Add("gap", PoolOp(PoolType::kGlobalAvg, 1, 1, 0), {whole});
  const NodeId relu = k.Add("relu", ActOp(Activation::kRelu), {whole});
  const NodeId sigmoid = k.Add("sigmoid", ActOp(Activation::kSigmoid), {whole});
  const NodeId add = k.Add("add", EltwiseOp(EltwiseType::kAdd), {{{conv3, 0, 8}}, {{conv1, 0, 8}}});
  const NodeId mul = k.Add("mul", EltwiseOp(EltwiseType::kMul), {{{0, 0, 8}}, {{0, 8, 16}}});
  const NodeId concat = k.Add("concat", IdentityOp(), {{{conv3, 0, 8}}, {{conv1, 0, 8}}, whole});
  const NodeId sequential =
      k.Add("sep",
            SequentialOp({ActOp(Activation::kRelu), ConvOp(16, 3, 1, 1, Activation::kNone, 16),
                          ConvOp(24, 1, 1, 0, Activation::kNone)}),
            {whole});
  const NodeId sliced = k.Add("sliced", ConvOp(4, 3, 1, 1, Activation::kTanh), {{{0, 4, 12}}});
  const NodeId summed = k.Add("summed", IdentityOp(), {{{0, 0, 8}, {0, 8, 16}}});
  const NodeId after = k.Add("after", ActOp(Activation::kTanh), {{{conv3, 2, 6}}});
  const Graph& graph = k.Finish();

  const auto single = [](NodeId id) { return Stage{Strategy::kParallel, {{id}}}; };
  const std::vector<KeyCase> cases = {
      {"conv", single(conv3)},
      {"conv_depthwise_strided", single(depthwise)},
      {"conv_dilated_no_bias", single(conv_dilated)},
      {"pool_max", single(max_pool)},
      {"pool_avg", single(avg_pool)},
      {"pool_global_avg", single(global_pool)},
      {"activation_relu", single(relu)},
      {"activation_sigmoid", single(sigmoid)},
      {"eltwise_add", single(add)},
      {"eltwise_mul_of_slices", single(mul)},
      {"identity_concat", single(concat)},
      {"sequential", single(sequential)},
      {"sliced_input", single(sliced)},
      {"summed_input", single(summed)},
      // 1x1 + 3x3, same stride, no dilation: mergeable under any correct rule.
      {"merge_1x1_3x3", Stage{Strategy::kMerge, {{conv3}, {conv1}}}},
      {"parallel_two_groups", Stage{Strategy::kParallel, {{conv3}, {max_pool}}}},
      {"group_chain_internal_input", Stage{Strategy::kParallel, {{conv3, after}}}},
  };

  std::string current;
  StageKeyer keyer(graph);
  for (const KeyCase& c : cases) {
    const std::string key = MakeStageSpec(graph, c.stage).Key();
    EXPECT_EQ(keyer.Key(c.stage), key) << c.label;
    ExpectParsesBack(MakeStageSpec(graph, c.stage), c.label);
    current += c.label + "\t" + key + "\n";
  }
  const std::string golden = ::ios::testing::Golden("stage_keys.txt", current);
  if (golden.empty()) return;
  // Line by line, so a failure names the case whose key moved.
  std::istringstream want(golden), got(current);
  std::string want_line, got_line;
  while (std::getline(want, want_line)) {
    ASSERT_TRUE(std::getline(got, got_line)) << "case missing now: " << want_line;
    EXPECT_EQ(got_line, want_line) << "a stage key changed: re-record only on purpose";
  }
  EXPECT_FALSE(std::getline(got, got_line)) << "case not in the golden file: " << got_line;
}

}  // namespace
}  // namespace ios
