// Merged convolutions with weights: the stacked convolution's output, cut
// by channel ranges, equals each member's own output.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/error.h"
#include "common/stage.h"
#include "exec/weights.h"
#include "tests/exec/exec_testing.h"

namespace ios::exec {
namespace {

using ::ios::exec::testing::ExpectClose;
using ::ios::exec::testing::Ramp;
using ::ios::exec::testing::RunOp;

ConvParams Member(int out, Window kernel, Window padding, Window stride = {1, 1},
                  Window dilation = {1, 1}, bool bias = true) {
  ConvParams c;
  c.out_channels = out;
  c.kernel = kernel;
  c.padding = padding;
  c.stride = stride;
  c.dilation = dilation;
  c.bias = bias;
  c.act = Activation::kRelu;
  return c;
}

struct MergeCase {
  std::string name;
  Shape input;
  std::vector<ConvParams> members;
};

class MergedConvTest : public ::testing::TestWithParam<MergeCase> {};

TEST_P(MergedConvTest, StackedOutputSlicedByChannelsEqualsEachMember) {
  const MergeCase& c = GetParam();
  for (const int batch : {1, 2}) {
    const std::vector<float> input = Ramp(testing::Elements(c.input, batch), 0.1f);
    std::vector<ConvWeights> weights;
    std::vector<const ConvWeights*> pointers;
    for (size_t i = 0; i < c.members.size(); ++i) {
      weights.push_back(RandomConvWeights(c.members[i], c.input.c, 100 + i));
    }
    for (const ConvWeights& w : weights) pointers.push_back(&w);
    OpParams merged;
    merged.kind = OpKind::kConv;
    merged.conv = MergedConv(c.members);
    const ConvWeights stacked = StackMergedWeights(c.members, pointers);
    const std::vector<float> all = RunOp(merged, {c.input}, {input}, batch, {stacked});
    const Shape out = InferOpOutput(merged, {c.input}, "merged");
    const size_t plane = static_cast<size_t>(out.h) * out.w;
    int offset = 0;
    for (size_t i = 0; i < c.members.size(); ++i) {
      OpParams member;
      member.kind = OpKind::kConv;
      member.conv = c.members[i];
      const std::vector<float> own = RunOp(member, {c.input}, {input}, batch, {weights[i]});
      const int channels = c.members[i].out_channels;
      std::vector<float> slice;
      for (int n = 0; n < batch; ++n) {
        const auto begin = all.begin() + static_cast<std::ptrdiff_t>(
                                             (static_cast<size_t>(n) * out.c + offset) * plane);
        slice.insert(slice.end(), begin, begin + static_cast<std::ptrdiff_t>(channels * plane));
      }
      ExpectClose(slice, own, 1e-5, c.name + " member " + std::to_string(i));
      offset += channels;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Cases, MergedConvTest,
    ::testing::Values(
        MergeCase{
            "1x1_3x3_5x5",
            {3, 7, 7},
            {Member(2, {1, 1}, {0, 0}), Member(3, {3, 3}, {1, 1}), Member(2, {5, 5}, {2, 2})}},
        MergeCase{"stride2_mixed_bias",
                  {3, 9, 8},
                  {Member(2, {1, 1}, {0, 0}, {2, 2}, {1, 1}, false),
                   Member(3, {3, 3}, {1, 1}, {2, 2}), Member(1, {5, 5}, {2, 2}, {2, 2})}},
        MergeCase{"no_bias",
                  {2, 5, 5},
                  {Member(2, {1, 1}, {0, 0}, {1, 1}, {1, 1}, false),
                   Member(2, {3, 3}, {1, 1}, {1, 1}, {1, 1}, false)}},
        MergeCase{
            "asymmetric_1x3_3x1",
            {2, 6, 5},
            {Member(2, {1, 3}, {0, 1}), Member(2, {3, 1}, {1, 0}), Member(1, {3, 3}, {1, 1})}},
        MergeCase{
            "dilated",
            {2, 9, 9},
            {Member(2, {3, 3}, {2, 2}, {1, 1}, {2, 2}), Member(2, {1, 1}, {0, 0}, {1, 1}, {2, 2})}},
        MergeCase{
            "even_kernels", {2, 6, 6}, {Member(2, {2, 2}, {0, 0}), Member(3, {4, 4}, {1, 1})}}),
    [](const ::testing::TestParamInfo<MergeCase>& param) { return param.param.name; });

TEST(StackMergedWeightsTest, CentresEachKernelAndStacksBiases) {
  ConvParams small = Member(1, {1, 1}, {0, 0});
  ConvParams large = Member(1, {3, 3}, {1, 1}, {1, 1}, {1, 1}, false);
  const ConvWeights a = testing::Weights(1, 1, 1, 1, {7}, {0.5f});
  const ConvWeights b = testing::Weights(1, 1, 3, 3, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  const ConvWeights s = StackMergedWeights({small, large}, {&a, &b});
  EXPECT_EQ(s.out_channels, 2);
  EXPECT_EQ(s.kernel_h, 3);
  EXPECT_EQ(s.kernel, (std::vector<float>{0, 0, 0, 0, 7, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
  EXPECT_EQ(s.bias, (std::vector<float>{0.5f, 0}));
}

TEST(StackMergedWeightsTest, RefusesMembersThatDoNotMergeOrWeightsThatDoNotFit) {
  const ConvParams one = Member(1, {1, 1}, {0, 0});
  const ConvParams off_centre = Member(1, {3, 3}, {0, 0});
  const ConvWeights a = testing::Weights(1, 1, 1, 1, {1}, {0});
  const ConvWeights b = testing::Weights(1, 1, 3, 3, std::vector<float>(9, 1.0f), {0});
  EXPECT_THROW(StackMergedWeights({one, off_centre}, {&a, &b}), Error);
  EXPECT_THROW(StackMergedWeights({one, one}, {&a, &b}), Error);
  EXPECT_THROW(StackMergedWeights({one}, {&a, &b}), Error);
}

}  // namespace
}  // namespace ios::exec
