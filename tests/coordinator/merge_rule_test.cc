// One merge rule everywhere: the graph check (CanMerge), the wire validator
// (a decoded merge query) and the DP's merge endings give the same verdict on
// the same convolutions, and the DP never proposes a merge the others refuse.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <ostream>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include "common/graph.h"
#include "common/stage.h"
#include "coordinator/dp.h"
#include "schema/protocol.h"

namespace ios::coordinator {
namespace {

ConvParams Conv(Window kernel, Window padding, Window stride = {1, 1}, Window dilation = {1, 1},
                Activation act = Activation::kRelu) {
  ConvParams c;
  c.out_channels = 8;
  c.kernel = kernel;
  c.padding = padding;
  c.stride = stride;
  c.dilation = dilation;
  c.act = act;
  return c;
}

// What a member of a test graph reads.
enum class Reads { kInput, kRelu, kHalfInput };

struct Member {
  ConvParams conv;
  Reads reads = Reads::kInput;
};

// input (8 x H x W) -> relu; each member conv reads the input, the relu or
// half of the input's channels; `pooled`: each member is followed by a
// global average pool so that members of any output size can meet in the
// exit concatenation. Returns the graph and the members' ids.
struct TestNet {
  Graph graph;
  std::vector<NodeId> members;
};

TestNet Build(const std::vector<Member>& members, Window input, bool pooled) {
  TestNet net;
  Graph& g = net.graph;
  g.name = "merge";
  auto add = [&g](const std::string& name, const OpParams& op, Inputs inputs) {
    g.nodes.push_back({name, "", op, std::move(inputs), {}});
    return static_cast<NodeId>(g.nodes.size()) - 1;
  };
  Node in{"in", "", {}, {}, {8, input.h, input.w}};
  in.op.kind = OpKind::kInput;
  g.nodes.push_back(in);
  OpParams relu;
  relu.kind = OpKind::kActivation;
  const NodeId r = add("relu", relu, {{{0, 0, 8}}});
  Inputs exit_inputs;
  for (size_t i = 0; i < members.size(); ++i) {
    OpParams op;
    op.kind = OpKind::kConv;
    op.conv = members[i].conv;
    const Slice source = members[i].reads == Reads::kRelu        ? Slice{r, 0, 8}
                         : members[i].reads == Reads::kHalfInput ? Slice{0, 0, 4}
                                                                 : Slice{0, 0, 8};
    const NodeId m = add("m" + std::to_string(i), op, {{source}});
    net.members.push_back(m);
    NodeId out = m;
    if (pooled) {
      OpParams pool;
      pool.kind = OpKind::kPool;
      pool.pool.type = PoolType::kGlobalAvg;
      out = add("p" + std::to_string(i), pool, {{{m, 0, 8}}});
    }
    exit_inputs.push_back({{out, 0, 8}});
  }
  OpParams concat;
  concat.kind = OpKind::kIdentity;
  const NodeId exit = add("exit", concat, exit_inputs);
  Block block{0, {}, exit, {}};
  for (NodeId id = 1; id < exit; ++id) block.inner.push_back(id);
  g.blocks.push_back(block);
  InferShapes(g);
  return net;
}

// The wire validator's verdict: the members' parallel spec sent as a merge.
bool ValidatorAccepts(const Graph& g, const std::vector<NodeId>& members, std::string& why) {
  Stage stage{Strategy::kParallel, {}};
  for (NodeId id : members) stage.groups.push_back({id});
  schema::StageQuery query;
  query.query_id = 1;
  query.stage = MakeStageSpec(g, stage);
  query.stage.strategy = Strategy::kMerge;
  const auto decoded = schema::Decode(schema::Encode(query));
  if (const auto* error = std::get_if<schema::DecodeError>(&decoded)) {
    why = error->message;
    return false;
  }
  return true;
}

// Operator sets (as node id sets) of the merge stages of two or more
// operators the DP enumerates for the whole block.
std::set<std::vector<NodeId>> DpMergeSets(const Graph& g) {
  DpOptions options;
  options.strategies = StrategySet::kMerge;
  const PartSpace space = PartSpace::Enumerate(g, g.blocks[0].Operators(), options);
  std::set<std::vector<NodeId>> sets;
  for (int i = 0; i < space.stage_count(); ++i) {
    const Stage stage = space.stage(i);
    if (stage.strategy != Strategy::kMerge || stage.OperatorCount() < 2) continue;
    std::vector<NodeId> ids;
    for (const auto& group : stage.groups) ids.insert(ids.end(), group.begin(), group.end());
    std::sort(ids.begin(), ids.end());
    sets.insert(ids);
  }
  return sets;
}

// ------------------------------------------------------ the same cases, three checks

struct RuleCase {
  std::string label;
  std::vector<Member> members;
  Window input;
  bool merges;
};
void PrintTo(const RuleCase& c, std::ostream* os) { *os << c.label; }

const RuleCase kCases[] = {
    {"1x1_3x3_5x5",
     {{Conv({1, 1}, {0, 0})}, {Conv({3, 3}, {1, 1})}, {Conv({5, 5}, {2, 2})}},
     {32, 32},
     true},
    {"1x3_and_3x1", {{Conv({1, 3}, {0, 1})}, {Conv({3, 1}, {1, 0})}}, {17, 17}, true},
    {"equal_strides",
     {{Conv({3, 3}, {1, 1}, {2, 2})}, {Conv({1, 1}, {0, 0}, {2, 2})}},
     {32, 32},
     true},
    {"other_strides", {{Conv({3, 3}, {1, 1}, {2, 2})}, {Conv({3, 3}, {1, 1})}}, {32, 32}, false},
    {"equal_dilations",
     {{Conv({3, 3}, {2, 2}, {1, 1}, {2, 2})}, {Conv({5, 5}, {4, 4}, {1, 1}, {2, 2})}},
     {32, 32},
     true},
    {"3x3_d2_and_3x3_d1",
     {{Conv({3, 3}, {2, 2}, {1, 1}, {2, 2})}, {Conv({3, 3}, {1, 1})}},
     {32, 32},
     false},
    {"2x2_and_3x3_equal_output",
     {{Conv({2, 2}, {0, 0}, {2, 2})}, {Conv({3, 3}, {1, 1}, {2, 2})}},
     {32, 32},
     false},
    {"equal_output_other_centre",
     {{Conv({1, 1}, {0, 0}, {3, 3})}, {Conv({3, 3}, {0, 0}, {3, 3})}},
     {33, 33},
     false},
    {"other_activation",
     {{Conv({3, 3}, {1, 1})}, {Conv({3, 3}, {1, 1}, {1, 1}, {1, 1}, Activation::kNone)}},
     {32, 32},
     false},
    {"other_tensor",
     {{Conv({3, 3}, {1, 1})}, {Conv({1, 1}, {0, 0}), Reads::kRelu}},
     {32, 32},
     false},
    {"other_channels",
     {{Conv({3, 3}, {1, 1})}, {Conv({1, 1}, {0, 0}), Reads::kHalfInput}},
     {32, 32},
     false},
};

class MergeRuleAgreementTest : public ::testing::TestWithParam<RuleCase> {};

TEST_P(MergeRuleAgreementTest, CanMergeTheValidatorAndTheDpGiveOneVerdict) {
  const RuleCase& c = GetParam();
  const TestNet net = Build(c.members, c.input, /*pooled=*/true);
  std::vector<NodeId> members = net.members;
  EXPECT_EQ(CanMerge(net.graph, members), c.merges);
  std::reverse(members.begin(), members.end());
  EXPECT_EQ(CanMerge(net.graph, members), c.merges) << "in reverse order";
  std::string why;
  EXPECT_EQ(ValidatorAccepts(net.graph, members, why), c.merges) << why;
  if (!c.merges) {
    EXPECT_NE(why.find("query.stage.groups[1].ops[0]"), std::string::npos) << why;
  }
  std::sort(members.begin(), members.end());
  EXPECT_EQ(DpMergeSets(net.graph).count(members), c.merges ? 1u : 0u);
}

INSTANTIATE_TEST_SUITE_P(Cases, MergeRuleAgreementTest, ::testing::ValuesIn(kCases),
                         [](const auto& param_info) { return param_info.param.label; });

// Three 1x1 convolutions of 30,000 output channels: each pair merges into
// 60,000 channels, all three would make 90,000, more than limits::kMaxExtent.
// The rule is checked on the set, so the DP must leave the triple out.
TEST(MergeRuleAgreementTest, NoMergeWhoseSummedChannelsExceedTheExtentLimit) {
  Graph g;
  g.name = "wide_merge";
  Node in{"in", "", {}, {}, {8, 4, 4}};
  in.op.kind = OpKind::kInput;
  g.nodes.push_back(in);
  constexpr int kChannels = 30'000;
  Term sum;
  Block block{0, {}, -1, {}};
  std::vector<NodeId> members;
  for (int i = 0; i < 3; ++i) {
    OpParams op;
    op.kind = OpKind::kConv;
    op.conv = Conv({1, 1}, {0, 0});
    op.conv.out_channels = kChannels;
    g.nodes.push_back({"m" + std::to_string(i), "", op, {{{0, 0, 8}}}, {}});
    members.push_back(static_cast<NodeId>(g.nodes.size()) - 1);
    block.inner.push_back(members.back());
    sum.push_back({members.back(), 0, kChannels});
  }
  OpParams add;
  add.kind = OpKind::kIdentity;
  g.nodes.push_back({"exit", "", add, {sum}, {}});
  block.exit = static_cast<NodeId>(g.nodes.size()) - 1;
  g.blocks.push_back(block);
  InferShapes(g);

  EXPECT_FALSE(CanMerge(g, members));
  std::string why;
  EXPECT_FALSE(ValidatorAccepts(g, members, why));
  EXPECT_NE(why.find("90000 output channels"), std::string::npos) << why;
  const std::set<std::vector<NodeId>> pairs = {
      {members[0], members[1]}, {members[0], members[2]}, {members[1], members[2]}};
  for (const std::vector<NodeId>& pair : pairs) {
    EXPECT_TRUE(CanMerge(g, pair));
    EXPECT_TRUE(ValidatorAccepts(g, pair, why)) << why;
  }
  EXPECT_EQ(DpMergeSets(g), pairs);
}

// Eleven convolutions of one input (and of other tensors), all 32x32: the DP's
// merge stages are exactly the subsets CanMerge accepts, and the validator
// accepts each of them.
TEST(MergeRuleAgreementTest, DpMergesExactlyTheSubsetsCanMergeAccepts) {
  ConvParams grouped = Conv({3, 3}, {1, 1});
  grouped.groups = 2;
  const std::vector<Member> members = {
      {Conv({1, 1}, {0, 0})},
      {Conv({3, 3}, {1, 1})},
      {Conv({5, 5}, {2, 2})},
      {Conv({1, 3}, {0, 1})},
      {Conv({3, 1}, {1, 0})},
      {Conv({3, 3}, {2, 2}, {1, 1}, {2, 2})},
      {Conv({5, 5}, {4, 4}, {1, 1}, {2, 2})},
      {Conv({3, 3}, {1, 1}, {1, 1}, {1, 1}, Activation::kNone)},
      {Conv({3, 3}, {1, 1}), Reads::kRelu},
      {Conv({3, 3}, {1, 1}), Reads::kHalfInput},
      {grouped},
  };
  const TestNet net = Build(members, {32, 32}, /*pooled=*/false);
  const std::set<std::vector<NodeId>> dp = DpMergeSets(net.graph);
  std::set<std::vector<NodeId>> accepted;
  const int n = static_cast<int>(net.members.size());
  for (uint32_t subset = 0; subset < (1u << n); ++subset) {
    if (std::popcount(subset) < 2) continue;
    std::vector<NodeId> ids;
    for (int i = 0; i < n; ++i) {
      if (subset >> i & 1) ids.push_back(net.members[i]);
    }
    if (CanMerge(net.graph, ids)) accepted.insert(ids);
  }
  // {1x1, 3x3, 5x5, 1x3, 3x1}: 26 subsets of two or more; the two dilated: 1.
  EXPECT_EQ(accepted.size(), 26u + 1u);
  EXPECT_EQ(dp, accepted);
  for (const std::vector<NodeId>& ids : dp) {
    std::string why;
    EXPECT_TRUE(ValidatorAccepts(net.graph, ids, why)) << why;
  }
}

}  // namespace
}  // namespace ios::coordinator
