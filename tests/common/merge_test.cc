// The merge rule (MergeSignatureOf, FindMergeConflict, CanMerge) and the
// convolution a merge stage runs (MergedConv): which convolutions merge, and
// that merging them is exact, checked against a direct convolution.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <optional>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/graph.h"
#include "common/stage.h"

namespace ios {
namespace {

// ---------------------------------------------------------------- builders

ConvParams Conv(Window kernel, Window padding, Window stride = {1, 1}, Window dilation = {1, 1},
                Activation act = Activation::kRelu) {
  ConvParams c;
  c.out_channels = 1;
  c.kernel = kernel;
  c.padding = padding;
  c.stride = stride;
  c.dilation = dilation;
  c.act = act;
  return c;
}

// `c` with `extra` rows/columns of zeros beyond its padding at the bottom/right.
ConvParams EndExtra(ConvParams c, Window extra) {
  c.padding_end_extra = extra;
  return c;
}

OpParams Op(const ConvParams& conv, int out_channels = 1) {
  OpParams op;
  op.kind = OpKind::kConv;
  op.conv = conv;
  op.conv.out_channels = out_channels;
  return op;
}

Shape OutputOf(const ConvParams& conv, const Shape& input) {
  return InferOpOutput(Op(conv), {input}, "test");
}

// ---------------------------------------------- a direct convolution, 1 channel

using Image = std::vector<std::vector<int64_t>>;  // [row][column]

// Cross-correlation of `in` with `weights` (kernel-sized) under `c`'s stride,
// padding and dilation; zero outside the input.
Image Convolve(const Image& in, const Image& weights, const ConvParams& c) {
  const Shape out = OutputOf(c, {1, static_cast<int>(in.size()), static_cast<int>(in[0].size())});
  Image result(out.h, std::vector<int64_t>(out.w, 0));
  for (int oy = 0; oy < out.h; ++oy) {
    for (int ox = 0; ox < out.w; ++ox) {
      int64_t sum = 0;
      for (int ky = 0; ky < c.kernel.h; ++ky) {
        for (int kx = 0; kx < c.kernel.w; ++kx) {
          const int y = oy * c.stride.h - c.padding.h + ky * c.dilation.h;
          const int x = ox * c.stride.w - c.padding.w + kx * c.dilation.w;
          if (y < 0 || x < 0 || y >= static_cast<int>(in.size()) ||
              x >= static_cast<int>(in[0].size())) {
            continue;
          }
          sum += weights[ky][kx] * in[y][x];
        }
      }
      result[oy][ox] = sum;
    }
  }
  return result;
}

// Random values in [-9, -1] and [1, 9].
Image Random(int h, int w, std::mt19937& rng) {
  // Nonzero, so that a kernel never shrinks by accident.
  std::uniform_int_distribution<int> value(1, 9), sign(0, 1);
  Image image(h, std::vector<int64_t>(w));
  for (auto& row : image) {
    for (auto& v : row) v = sign(rng) ? value(rng) : -value(rng);
  }
  return image;
}

// `weights` zero-padded to `size`, centred: what a merge stage runs.
Image Centred(const Image& weights, Window size) {
  const int kh = static_cast<int>(weights.size()), kw = static_cast<int>(weights[0].size());
  Image out(size.h, std::vector<int64_t>(size.w, 0));
  for (int y = 0; y < kh; ++y) {
    for (int x = 0; x < kw; ++x) out[y + (size.h - kh) / 2][x + (size.w - kw) / 2] = weights[y][x];
  }
  return out;
}

// Whether running `convs` merged (centred kernels, MergedConv's parameters)
// gives every member's own output on an input of `input` H x W.
bool MergeIsExact(const std::vector<ConvParams>& convs, Window input, std::mt19937& rng) {
  const ConvParams merged = MergedConv(convs);
  const Image in = Random(input.h, input.w, rng);
  for (const ConvParams& c : convs) {
    const Image weights = Random(c.kernel.h, c.kernel.w, rng);
    if (Convolve(in, weights, c) != Convolve(in, Centred(weights, merged.kernel), merged)) {
      return false;
    }
  }
  return true;
}

// ------------------------------------------------------ the rule, case by case

struct ConvMergeCase {
  std::string label;
  std::vector<ConvParams> convs;
  Window input;       // H x W of the shared input
  ConvParams merged;  // kernel and padding expected (the rest as convs[0])
};
void PrintTo(const ConvMergeCase& c, std::ostream* os) { *os << c.label; }

const ConvMergeCase kMergeCases[] = {
    {"1x1_3x3_5x5",
     {Conv({1, 1}, {0, 0}), Conv({3, 3}, {1, 1}), Conv({5, 5}, {2, 2})},
     {32, 32},
     Conv({5, 5}, {2, 2})},
    {"1x3_and_3x1_into_3x3",
     {Conv({1, 3}, {0, 1}), Conv({3, 1}, {1, 0})},
     {17, 17},
     Conv({3, 3}, {1, 1})},
    {"strided_with_equal_stride",
     {Conv({3, 3}, {1, 1}, {2, 2}), Conv({1, 1}, {0, 0}, {2, 2})},
     {32, 32},
     Conv({3, 3}, {1, 1}, {2, 2})},
    {"equally_dilated_1x1_3x3_5x5",
     {Conv({3, 3}, {2, 2}, {1, 1}, {2, 2}), Conv({5, 5}, {4, 4}, {1, 1}, {2, 2}),
      Conv({1, 1}, {0, 0}, {1, 1}, {2, 2})},
     {32, 32},
     Conv({5, 5}, {4, 4}, {1, 1}, {2, 2})},
    {"strided_1x7_and_7x1_with_odd_input",
     {Conv({1, 7}, {0, 3}, {2, 2}), Conv({7, 1}, {3, 0}, {2, 2}), Conv({3, 3}, {1, 1}, {2, 2})},
     {17, 17},
     Conv({7, 7}, {3, 3}, {2, 2})},
    // TensorFlow's SAME at stride 2 on an even input: one more zero row and
    // column at the end; equal extras keep one centre and one output size.
    {"equal_end_extra_5x5_and_3x3_stride2",
     {EndExtra(Conv({5, 5}, {1, 1}, {2, 2}), {1, 1}),
      EndExtra(Conv({3, 3}, {0, 0}, {2, 2}), {1, 1})},
     {16, 16},
     EndExtra(Conv({5, 5}, {1, 1}, {2, 2}), {1, 1})},
    {"equal_end_extra_in_height_only",
     {EndExtra(Conv({3, 3}, {1, 1}, {2, 2}), {1, 0}),
      EndExtra(Conv({1, 1}, {0, 0}, {2, 2}), {1, 0})},
     {15, 12},
     EndExtra(Conv({3, 3}, {1, 1}, {2, 2}), {1, 0})},
};

class MergeCaseTest : public ::testing::TestWithParam<ConvMergeCase> {};

TEST_P(MergeCaseTest, TheRuleAcceptsEveryPair) {
  const ConvMergeCase& c = GetParam();
  for (const ConvParams& a : c.convs) {
    for (const ConvParams& b : c.convs) {
      const std::optional<MergeConflict> conflict = FindMergeConflict(Op(a), Op(b));
      EXPECT_FALSE(conflict) << conflict->field << ": " << conflict->reason;
      EXPECT_EQ(MergeSignatureOf(Op(a)), MergeSignatureOf(Op(b)));
    }
  }
}

TEST_P(MergeCaseTest, MergedConvIsTheSameForEveryOrderOfTheMembers) {
  const ConvMergeCase& c = GetParam();
  std::vector<int> order(c.convs.size());
  std::iota(order.begin(), order.end(), 0);
  int permutations = 0;
  do {
    std::vector<ConvParams> permuted;
    for (int i : order) permuted.push_back(c.convs[i]);
    const ConvParams merged = MergedConv(permuted);
    EXPECT_EQ(merged, MergedConv(c.convs));
    EXPECT_EQ(merged.kernel, c.merged.kernel);
    EXPECT_EQ(merged.padding, c.merged.padding);
    EXPECT_EQ(merged.padding_end_extra, c.merged.padding_end_extra);
    EXPECT_EQ(merged.stride, c.convs[0].stride);
    EXPECT_EQ(merged.dilation, c.convs[0].dilation);
    EXPECT_EQ(merged.out_channels, static_cast<int>(c.convs.size()));
    ++permutations;
  } while (std::next_permutation(order.begin(), order.end()));
  EXPECT_GE(permutations, 2);
}

TEST_P(MergeCaseTest, MergedOutputHasEveryMembersHeightAndWidth) {
  const ConvMergeCase& c = GetParam();
  const Shape input{8, c.input.h, c.input.w};
  const Shape merged = OutputOf(MergedConv(c.convs), input);
  for (const ConvParams& conv : c.convs) {
    const Shape member = OutputOf(conv, input);
    EXPECT_EQ(merged.h, member.h);
    EXPECT_EQ(merged.w, member.w);
  }
}

TEST_P(MergeCaseTest, MergedConvComputesEveryMembersOutput) {
  std::mt19937 rng(7);
  EXPECT_TRUE(MergeIsExact(GetParam().convs, GetParam().input, rng));
}

INSTANTIATE_TEST_SUITE_P(Cases, MergeCaseTest, ::testing::ValuesIn(kMergeCases),
                         [](const auto& param_info) { return param_info.param.label; });

struct RefusedCase {
  std::string label;
  ConvParams a, b;
  const char* field;  // the conflict FindMergeConflict names
};
void PrintTo(const RefusedCase& c, std::ostream* os) { *os << c.label; }

const RefusedCase kRefusedCases[] = {
    {"other_stride", Conv({3, 3}, {1, 1}, {2, 2}), Conv({3, 3}, {1, 1}, {1, 1}), "strideH"},
    // Both 32x32 on 32x32; merged, one order used to give 34x34.
    {"3x3_d2_and_3x3_d1", Conv({3, 3}, {2, 2}, {1, 1}, {2, 2}), Conv({3, 3}, {1, 1}), "dilationH"},
    // Equal outputs (16x16 on 32x32), but a 2x2 kernel cannot sit centred in a 3x3.
    {"2x2_and_3x3_odd_difference", Conv({2, 2}, {0, 0}, {2, 2}), Conv({3, 3}, {1, 1}, {2, 2}),
     "kernelH"},
    {"1x2_and_1x3_odd_difference", Conv({1, 2}, {0, 0}), Conv({1, 3}, {0, 1}), "kernelW"},
    // Equal outputs (11x11 on 33x33), but the windows centre on other pixels.
    {"equal_output_other_centre", Conv({1, 1}, {0, 0}, {3, 3}), Conv({3, 3}, {0, 0}, {3, 3}),
     "padH"},
    {"other_padding_in_width", Conv({3, 3}, {1, 1}), Conv({3, 3}, {1, 0}), "padW"},
    // Same centres, but on an even input the extra row adds an output row
    // (8 against 7 on 16 rows): the signature does not know the input, so
    // unequal extras never merge.
    {"other_end_extra_in_height", EndExtra(Conv({3, 3}, {0, 0}, {2, 2}), {1, 0}),
     Conv({3, 3}, {0, 0}, {2, 2}), "padEndH"},
    {"other_end_extra_in_width", EndExtra(Conv({3, 3}, {1, 1}), {0, 2}),
     EndExtra(Conv({3, 3}, {1, 1}), {0, 1}), "padEndW"},
    {"other_activation", Conv({3, 3}, {1, 1}),
     Conv({3, 3}, {1, 1}, {1, 1}, {1, 1}, Activation::kNone), "activation"},
};

class RefusedCaseTest : public ::testing::TestWithParam<RefusedCase> {};

TEST_P(RefusedCaseTest, TheRuleNamesTheFieldInEitherOrderAndMergedConvThrows) {
  const RefusedCase& c = GetParam();
  for (const auto& [first, second] : {std::pair{c.a, c.b}, std::pair{c.b, c.a}}) {
    const std::optional<MergeConflict> conflict = FindMergeConflict(Op(first), Op(second));
    ASSERT_TRUE(conflict);
    EXPECT_EQ(conflict->field, c.field) << conflict->reason;
    EXPECT_NE(MergeSignatureOf(Op(first)), MergeSignatureOf(Op(second)));
    EXPECT_THROW(MergedConv({first, second}), Error);
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, RefusedCaseTest, ::testing::ValuesIn(kRefusedCases),
                         [](const auto& param_info) { return param_info.param.label; });

TEST(MergeRuleTest, OnlyUngroupedConvolutionsHaveASignature) {
  EXPECT_TRUE(MergeSignatureOf(Op(Conv({3, 3}, {1, 1}))));
  OpParams depthwise = Op(Conv({3, 3}, {1, 1}), 8);
  depthwise.conv.groups = 8;
  EXPECT_FALSE(MergeSignatureOf(depthwise));
  EXPECT_EQ(FindMergeConflict(Op(Conv({3, 3}, {1, 1})), depthwise)->field, "groups");
  OpParams pool;
  pool.kind = OpKind::kPool;
  EXPECT_FALSE(MergeSignatureOf(pool));
  EXPECT_EQ(FindMergeConflict(pool, Op(Conv({3, 3}, {1, 1})))->field, "kind");
}

// --------------------------------------------- the rule over a parameter space

// Whether `c`'s window fits the padded input of height `h`.
bool Fits(const ConvParams& c, int h) {
  return h + 2 * c.padding.h >= c.dilation.h * (c.kernel.h - 1) + 1;
}

// Every pair of 1-D convolutions (kernel 1..5, padding 0..4, stride 1..3,
// dilation 1..3) on inputs of 9..12: whenever the rule accepts a pair, the
// merged convolution has the members' output size and computes their outputs.
// Whenever the old rule (equal output size, stride, activation) accepted a
// pair that the new one refuses, centring the smaller kernel would be wrong.
TEST(MergeRuleTest, AcceptedPairsMergeExactlyAndOldRuleWasWrongOnTheRest) {
  std::vector<ConvParams> convs;
  for (int k = 1; k <= 5; ++k) {
    for (int p = 0; p <= 4; ++p) {
      for (int s = 1; s <= 3; ++s) {
        for (int d = 1; d <= 3; ++d) convs.push_back(Conv({k, 1}, {p, 0}, {s, 1}, {d, 1}));
      }
    }
  }
  std::mt19937 rng(11);
  int accepted = 0, wrong_before = 0;
  for (int h = 9; h <= 12; ++h) {
    const Shape input{1, h, 1};
    for (const ConvParams& a : convs) {
      if (!Fits(a, h)) continue;
      for (const ConvParams& b : convs) {
        if (b.stride != a.stride || !Fits(b, h)) continue;
        const Shape out_a = OutputOf(a, input), out_b = OutputOf(b, input);
        const bool merges = !FindMergeConflict(Op(a), Op(b));
        if (merges) {
          ++accepted;
          const ConvParams merged = MergedConv({a, b});
          ASSERT_EQ(OutputOf(merged, input).h, out_a.h);
          ASSERT_EQ(out_b.h, out_a.h);
          ASSERT_TRUE(MergeIsExact({a, b}, {h, 1}, rng))
              << "k" << a.kernel.h << " p" << a.padding.h << " / k" << b.kernel.h << " p"
              << b.padding.h << " s" << a.stride.h << " d" << a.dilation.h;
        } else if (out_a.h == out_b.h && a.dilation == b.dilation &&
                   (a.kernel.h - b.kernel.h) % 2 == 0) {
          // The old rule merged these: centred, the merge computes something else.
          ++wrong_before;
          const int kmax = std::max(a.kernel.h, b.kernel.h);
          ConvParams old = a;
          old.kernel.h = kmax;
          old.padding.h = std::max(a.padding.h, b.padding.h);
          const Image in = Random(h, 1, rng);
          bool exact = OutputOf(old, input).h == out_a.h;
          for (const ConvParams& c : {a, b}) {
            const Image weights = Random(c.kernel.h, 1, rng);
            exact = exact &&
                    Convolve(in, weights, c) == Convolve(in, Centred(weights, old.kernel), old);
          }
          // Some output reads other pixels; with nonzero weights and inputs
          // the sums differ (checked: no accidental agreement here).
          EXPECT_FALSE(exact) << "k" << a.kernel.h << " p" << a.padding.h << " / k" << b.kernel.h
                              << " p" << b.padding.h << " s" << a.stride.h << " d" << a.dilation.h
                              << " h" << h;
        }
      }
    }
  }
  EXPECT_GT(accepted, 1000);
  EXPECT_GT(wrong_before, 0);
}

// ------------------------------------------------------------ on a graph

// A graph built node by node, closed by a concatenation of every node into
// one block.
struct MergeGraph {
  Graph graph;
  void Finish() {
    const NodeId last = static_cast<NodeId>(graph.nodes.size()) - 1;
    Inputs all;
    for (NodeId id = 1; id <= last; ++id) all.push_back({{id, 0, 8}});
    OpParams concat;
    concat.kind = OpKind::kIdentity;
    const NodeId exit = Add(concat, all);
    Block block{0, {}, exit, {}};
    for (NodeId id = 1; id < exit; ++id) block.inner.push_back(id);
    graph.blocks.push_back(block);
    InferShapes(graph);
  }
  NodeId Add(const OpParams& op, Inputs inputs) {
    Node node;
    node.name = "n" + std::to_string(graph.nodes.size());
    node.op = op;
    node.inputs = std::move(inputs);
    graph.nodes.push_back(std::move(node));
    return static_cast<NodeId>(graph.nodes.size()) - 1;
  }
};

TEST(CanMergeTest, NeedsIdenticalInputsAndEqualSignatures) {
  MergeGraph m;
  Node input;
  input.name = "in";
  input.op.kind = OpKind::kInput;
  input.output = {8, 16, 16};
  m.graph.nodes.push_back(input);
  OpParams relu;
  relu.kind = OpKind::kActivation;
  const NodeId r = m.Add(relu, {{{0, 0, 8}}});
  const NodeId c1 = m.Add(Op(Conv({1, 1}, {0, 0}), 8), {{{0, 0, 8}}});
  const NodeId c3 = m.Add(Op(Conv({3, 3}, {1, 1}), 8), {{{0, 0, 8}}});
  const NodeId other = m.Add(Op(Conv({3, 3}, {1, 1}), 8), {{{r, 0, 8}}});
  const NodeId half = m.Add(Op(Conv({3, 3}, {1, 1}), 8), {{{0, 0, 4}}});
  // Two terms (input ++ relu) and a sum (input + relu): read identically, they merge.
  const NodeId cat1 = m.Add(Op(Conv({1, 1}, {0, 0}), 8), {{{0, 0, 8}}, {{r, 0, 8}}});
  const NodeId cat3 = m.Add(Op(Conv({3, 3}, {1, 1}), 8), {{{0, 0, 8}}, {{r, 0, 8}}});
  const NodeId sum3 = m.Add(Op(Conv({3, 3}, {1, 1}), 8), {{{0, 0, 8}, {r, 0, 8}}});
  const NodeId d2 = m.Add(Op(Conv({3, 3}, {2, 2}, {1, 1}, {2, 2}), 8), {{{0, 0, 8}}});
  OpParams grouped = Op(Conv({3, 3}, {1, 1}), 8);
  grouped.conv.groups = 2;
  const NodeId g1 = m.Add(grouped, {{{0, 0, 8}}});
  const NodeId g2 = m.Add(grouped, {{{0, 0, 8}}});
  m.Finish();

  EXPECT_TRUE(CanMerge(m.graph, {c1, c3}));
  EXPECT_TRUE(CanMerge(m.graph, {c3, c1}));
  EXPECT_TRUE(CanMerge(m.graph, {cat1, cat3}));
  EXPECT_FALSE(CanMerge(m.graph, {c3, other}));  // another tensor
  EXPECT_FALSE(CanMerge(m.graph, {c3, half}));   // other channels of the same tensor
  EXPECT_FALSE(CanMerge(m.graph, {cat3, sum3}));
  EXPECT_FALSE(CanMerge(m.graph, {c3, d2}));
  EXPECT_FALSE(CanMerge(m.graph, {g1, g2}));
  EXPECT_FALSE(CanMerge(m.graph, {r, c1}));
  EXPECT_TRUE(CanMerge(m.graph, {g1}));  // a single operator always is
  EXPECT_FALSE(CanMerge(m.graph, {}));
}

TEST(CanMergeTest, MakeStageSpecNamesTheConflictOfAnUnmergeableMergeStage) {
  MergeGraph m;
  Node input;
  input.name = "in";
  input.op.kind = OpKind::kInput;
  input.output = {8, 16, 16};
  m.graph.nodes.push_back(input);
  const NodeId c3 = m.Add(Op(Conv({3, 3}, {1, 1}), 8), {{{0, 0, 8}}});
  const NodeId d2 = m.Add(Op(Conv({3, 3}, {2, 2}, {1, 1}, {2, 2}), 8), {{{0, 0, 8}}});
  m.Finish();
  try {
    MakeStageSpec(m.graph, {Strategy::kMerge, {{c3}, {d2}}});
    ADD_FAILURE() << "a 3x3 d2 merged with a 3x3 d1 was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("dilationH: dilations 1 and 2 differ"), std::string::npos)
        << e.what();
  }
}

// Two 1x1 convs of 40,000 output channels each would make one conv of
// 80,000, more than limits::kMaxExtent: no worker could measure it.
TEST(CanMergeTest, RefusesAMergeWhoseSummedOutputChannelsExceedTheExtentLimit) {
  MergeGraph m;
  Node input;
  input.name = "in";
  input.op.kind = OpKind::kInput;
  input.output = {8, 16, 16};
  m.graph.nodes.push_back(input);
  const NodeId a = m.Add(Op(Conv({1, 1}, {0, 0}), 40'000), {{{0, 0, 8}}});
  const NodeId b = m.Add(Op(Conv({1, 1}, {0, 0}), 40'000), {{{0, 0, 8}}});
  const NodeId c = m.Add(Op(Conv({1, 1}, {0, 0}), 25'000), {{{0, 0, 8}}});
  m.Finish();
  EXPECT_FALSE(CanMerge(m.graph, {a, b}));
  EXPECT_TRUE(CanMerge(m.graph, {a, c}));  // 65,000: within the limit
  EXPECT_TRUE(CanMerge(m.graph, {a}));
  try {
    MakeStageSpec(m.graph, {Strategy::kMerge, {{a}, {b}}});
    ADD_FAILURE() << "a merge of 80000 output channels was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("80000 output channels"), std::string::npos) << e.what();
  }
  ConvParams big = Conv({1, 1}, {0, 0});
  big.out_channels = 40'000;
  EXPECT_THROW(MergedConv({big, big}), Error);
  ConvParams small = big;
  small.out_channels = 25'000;
  EXPECT_EQ(MergedConv({big, small}).out_channels, 65'000);
}

TEST(MergedConvTest, SumsChannelsAndKeepsABiasIfAnyMemberHasOne) {
  ConvParams a = Conv({1, 1}, {0, 0}), b = Conv({3, 3}, {1, 1});
  a.out_channels = 16;
  b.out_channels = 48;
  a.bias = false;
  b.bias = true;
  const ConvParams merged = MergedConv({a, b});
  EXPECT_EQ(merged.out_channels, 64);
  EXPECT_TRUE(merged.bias);
  EXPECT_EQ(merged.groups, 1);
  EXPECT_EQ(merged.act, Activation::kRelu);
  b.bias = false;
  EXPECT_FALSE(MergedConv({a, b}).bias);
  EXPECT_THROW(MergedConv({}), Error);
}

}  // namespace
}  // namespace ios
