// One resolution of inputs (common/slices.h): terms of channel slices to
// term shapes, source views and the input an operator reads.
#include "common/slices.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/limits.h"
#include "tests/testing/ops.h"

namespace ios {
namespace {

using ::ios::testing::ConvOp;
using ::ios::testing::EltwiseOp;
using ::ios::testing::IdentityOp;

constexpr Shape kA{32, 14, 14}, kB{16, 14, 14}, kSmall{16, 7, 7};

// Throws unless ResolveInput refuses `terms` with `kind` at `field`, with
// `reason_start` at the start of its reason.
void ExpectRefused(OpKind kind, std::vector<std::vector<SliceView>> terms,
                   InputError::Kind error_kind, const std::string& field,
                   const std::string& reason_start) {
  try {
    ResolveInput(kind, std::move(terms));
    ADD_FAILURE() << "expected an error at " << field;
  } catch (const InputError& e) {
    EXPECT_EQ(e.kind(), error_kind) << e.what();
    EXPECT_EQ(e.field(), field) << e.what();
    EXPECT_EQ(e.reason().rfind(reason_start, 0), 0u) << e.what();
    EXPECT_EQ(std::string(e.what()), e.field() + ": " + e.reason());
  }
}

TEST(ResolveInputTest, ConcatenatesTermsAndKeepsEverySliceView) {
  // term 0: channels 8..24 of A plus channels 0..16 of B (summed);
  // term 1: the whole of B.
  const ResolvedInput in =
      ResolveInput(OpKind::kConv, {{{0, 8, 24, kA}, {1, 0, 16, kB}}, {{1, 0, 16, kB}}});
  ASSERT_EQ(in.terms.size(), 2u);
  EXPECT_EQ(in.terms[0].shape, (Shape{16, 14, 14}));
  EXPECT_EQ(in.terms[1].shape, (Shape{16, 14, 14}));
  EXPECT_EQ(in.terms[0].slices[0], (SliceView{0, 8, 24, kA}));
  EXPECT_EQ(in.terms[0].slices[1], (SliceView{1, 0, 16, kB}));
  EXPECT_EQ(in.shape, (Shape{32, 14, 14}));
  EXPECT_EQ(in.TermShapes(), (std::vector<Shape>{{16, 14, 14}, {16, 14, 14}}));
  EXPECT_TRUE(in.sums_slices);
  EXPECT_DOUBLE_EQ(in.elements_read, 3 * 16 * 14 * 14);
  EXPECT_DOUBLE_EQ(in.sum_additions, 16 * 14 * 14);  // one addition per element of term 0
}

TEST(ResolveInputTest, EltwiseTermsCombineInsteadOfConcatenating) {
  const ResolvedInput in =
      ResolveInput(OpKind::kEltwise, {{{0, 0, 16, kA}}, {{1, 0, 16, kB}}, {{0, 16, 32, kA}}});
  EXPECT_EQ(in.shape, (Shape{16, 14, 14}));
  EXPECT_FALSE(in.sums_slices);
  EXPECT_DOUBLE_EQ(in.sum_additions, 0);
  ExpectRefused(OpKind::kEltwise, {{{0, 0, 16, kA}}, {{1, 0, 8, kB}}},
                InputError::Kind::kTermShapes, "inputs", "eltwise terms differ in shape");
}

TEST(ResolveInputTest, RefusesBadSlicesNamingTheField) {
  using Kind = InputError::Kind;
  ExpectRefused(OpKind::kConv, {}, Kind::kNoTerm, "inputs", "an op needs at least one input term");
  ExpectRefused(OpKind::kConv, {{{0, 0, 4, kA}}, {}}, Kind::kEmptyTerm, "inputs[1]",
                "a term needs at least one slice");
  ExpectRefused(OpKind::kConv, {{{0, -4, 4, kA}}}, Kind::kRange, "inputs[0][0].begin",
                "-4 is negative");
  ExpectRefused(OpKind::kConv, {{{0, 0, 4, kA}, {0, 8, 8, kA}}}, Kind::kRange, "inputs[0][1].begin",
                "8 not below end 8");
  ExpectRefused(OpKind::kConv, {{{0, 0, 4, kA}}, {{1, 8, 17, kB}}}, Kind::kRange,
                "inputs[1][0].end", "17 beyond the 16 channels of the tensor read");
  ExpectRefused(OpKind::kConv, {{{0, 0, 16, kA}, {1, 0, 8, kB}}}, Kind::kSummed, "inputs[0][1]",
                "summed slices differ in shape (16x14x14 vs 8x14x14)");
  ExpectRefused(OpKind::kConv, {{{0, 0, 16, kA}, {2, 0, 16, kSmall}}}, Kind::kSummed,
                "inputs[0][1]", "summed slices differ in shape (16x14x14 vs 16x7x7)");
  ExpectRefused(OpKind::kIdentity, {{{0, 0, 16, kA}}, {{2, 0, 16, kSmall}}}, Kind::kTermShapes,
                "inputs", "spatial mismatch between concatenated terms (16x14x14 vs 16x7x7)");
}

TEST(ResolveInputTest, RefusesWhatNoWorkerCanMeasure) {
  using Kind = InputError::Kind;
  const Shape wide{limits::kMaxExtent, 1, 1};
  ExpectRefused(OpKind::kIdentity,
                std::vector<std::vector<SliceView>>(limits::kMaxTerms + 1, {{0, 0, 1, kA}}),
                Kind::kLimit, "inputs", "number of concatenated terms 1025 exceeds the limit");
  ExpectRefused(OpKind::kIdentity,
                {std::vector<SliceView>(limits::kMaxSlices + 1, SliceView{0, 0, 1, kA})},
                Kind::kLimit, "inputs[0]", "number of summed slices 1025 exceeds the limit");
  ExpectRefused(OpKind::kIdentity, {{{0, 0, limits::kMaxExtent, wide}}, {{0, 0, 1, wide}}},
                Kind::kLimit, "inputs", "channel count 65537 exceeds the limit of 65536");
  // Element-wise terms do not concatenate: the same two terms are fine.
  EXPECT_NO_THROW(ResolveInput(OpKind::kEltwise, {{{0, 0, 1, wide}}, {{0, 1, 2, wide}}}));
}

Graph Diamond() {
  Graph g;
  g.name = "diamond";
  Node in{"in", "", {}, {}, {16, 8, 8}};
  in.op.kind = OpKind::kInput;
  g.nodes.push_back(in);
  g.nodes.push_back({"a", "", ConvOp(8, 3, 1, 1), {{{0, 0, 16}}}, {}});
  g.nodes.push_back({"b", "", ConvOp(8, 1), {{{0, 0, 16}}}, {}});
  g.nodes.push_back({"cat", "", IdentityOp(), {{{1, 0, 8}, {2, 0, 8}}, {{0, 4, 12}}}, {}});
  g.blocks.push_back({0, {1, 2}, 3, {}});
  InferShapes(g);
  return g;
}

TEST(ResolveNodeInputTest, ViewsNameProducersAndProducersMustComeFirst) {
  const Graph g = Diamond();
  const ResolvedInput in = ResolveNodeInput(g, 3, OpKind::kIdentity, g.node(3).inputs);
  EXPECT_EQ(in.terms[0].slices[1], (SliceView{2, 0, 8, {8, 8, 8}}));
  EXPECT_EQ(in.terms[1].slices[0], (SliceView{0, 4, 12, {16, 8, 8}}));
  EXPECT_EQ(in.shape, (Shape{16, 8, 8}));
  EXPECT_EQ(g.node(3).output, in.shape);
  // A node being added (id == size) may read every node; node 2 may not read itself.
  EXPECT_NO_THROW(ResolveNodeInput(g, 4, OpKind::kIdentity, {{{3, 0, 16}}}));
  try {
    ResolveNodeInput(g, 2, OpKind::kIdentity, {{{0, 0, 16}}, {{2, 0, 8}}});
    ADD_FAILURE() << "expected an error";
  } catch (const InputError& e) {
    EXPECT_EQ(e.kind(), InputError::Kind::kReference);
    EXPECT_EQ(e.term(), 1);
    EXPECT_EQ(e.slice(), 0);
    EXPECT_EQ(std::string(e.what()),
              "inputs: producer 'b' does not come before it (a cycle, or nodes out of "
              "topological order)");
  }
  EXPECT_THROW(ResolveNodeInput(g, 4, OpKind::kIdentity, {{{9, 0, 1}}}), InputError);
}

// Shape inference keeps its own words for a slice out of range (it names the
// producer) and reads every other input error as the resolver words it.
TEST(ResolveNodeInputTest, ShapeInferenceReportsResolverErrorsWithTheNode) {
  Graph range = Diamond();
  range.nodes[3].inputs[1][0].end = 17;
  try {
    InferShapes(range);
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "node 'cat': inputs: slice [4, 17) out of range of 'in' with 16 channels");
  }
  Graph summed = Diamond();
  summed.nodes[3].inputs[0][1].end = 4;
  try {
    InferShapes(summed);
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "node 'cat': inputs[0][1]: summed slices differ in shape (8x8x8 vs 4x8x8)");
  }
}

StageSpec TwoGroupSpec() {
  // externals: 0 = 32x14x14, 1 = 16x14x14; group 0: conv -> eltwise add.
  StageSpec spec;
  spec.externals = {kA, kB};
  StageOp conv{ConvOp(16, 1), {{{true, 0, 0, 32}}}, {16, 14, 14}};
  StageOp add{EltwiseOp(EltwiseType::kAdd), {{{false, 0, 0, 16}}, {{true, 1, 0, 16}}}, kB};
  StageOp cat{IdentityOp(), {{{true, 1, 0, 16}, {true, 0, 16, 32}}, {{true, 0, 0, 8}}}, {}};
  cat.output = {24, 14, 14};
  spec.groups = {{conv, add}, {cat}};
  return spec;
}

TEST(ResolveStageInputTest, NumbersSourcesExternalsFirstThenTheGroupsOps) {
  const StageSpec spec = TwoGroupSpec();
  const ResolvedInput add = ResolveStageInput(spec, 0, 1);
  EXPECT_EQ(add.terms[0].slices[0], (SliceView{2, 0, 16, {16, 14, 14}}));  // op 0 of the group
  EXPECT_EQ(add.terms[1].slices[0], (SliceView{1, 0, 16, kB}));
  EXPECT_EQ(StageSource(spec, {false, 0, 0, 16}), 2);
  EXPECT_EQ(StageSource(spec, {true, 1, 0, 16}), 1);
  const ResolvedInput cat = ResolveStageInput(spec, 1, 0);
  EXPECT_EQ(cat.shape, (Shape{24, 14, 14}));
  EXPECT_TRUE(cat.sums_slices);
}

TEST(ResolveStageInputTest, RefusesReferencesTheWireValidatorRefuses) {
  StageSpec spec = TwoGroupSpec();
  spec.groups[0][0].inputs[0][0].index = 7;
  try {
    ResolveStageInput(spec, 0, 0);
    ADD_FAILURE() << "expected an error";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()), "inputs[0][0].index: 7 out of range (2 externals)");
  }
  spec = TwoGroupSpec();
  spec.groups[0][1].inputs[0][0].index = 1;  // itself
  try {
    ResolveStageInput(spec, 0, 1);
    ADD_FAILURE() << "expected an error";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()),
              "inputs[0][0].index: 1 is not an earlier op of the group (op 1)");
  }
}

}  // namespace
}  // namespace ios
