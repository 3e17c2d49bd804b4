// A small graph with one node of every op kind and attribute of interest
// (8x9x9 input): what the backend conformance test measures on every
// backend, and what the cuda device's tests prepare against the recording
// fake and, on a GPU, check numerically.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "common/graph.h"
#include "common/op_kinds.h"
#include "common/stage.h"
#include "tests/testing/ops.h"

namespace ios::devices {

inline OpParams Conv(int out, int kernel, int pad, int stride = 1, int dilation = 1, int groups = 1,
                     Activation act = Activation::kRelu) {
  OpParams op;
  op.kind = OpKind::kConv;
  op.conv.out_channels = out;
  op.conv.kernel = {kernel, kernel};
  op.conv.padding = {pad, pad};
  op.conv.stride = {stride, stride};
  op.conv.dilation = {dilation, dilation};
  op.conv.groups = groups;
  op.conv.act = act;
  return op;
}

//! The graph: every kind of interest, on an 8x9x9 input.
class Network {
 public:
  Network() {
    Node input{"in", "", {}, {}, {8, 9, 9}};
    input.op.kind = OpKind::kInput;
    graph_.nodes.push_back(input);
    Add("conv3", Conv(8, 3, 1), {{{0, 0, 8}}});
    Add("conv1", Conv(8, 1, 0), {{{0, 0, 8}}});
    Add("depthwise_s2", Conv(8, 3, 1, 2, 1, 8), {{{0, 0, 8}}});
    Add("grouped_dilated", Conv(4, 3, 2, 1, 2, 2, Activation::kSigmoid), {{{0, 0, 8}}});
    Add("conv_tanh_nobias",
        [] {
          OpParams op = Conv(6, 1, 0, 1, 1, 1, Activation::kTanh);
          op.conv.bias = false;
          return op;
        }(),
        {{{0, 0, 8}}});
    Add("max_pool", ::ios::testing::PoolOp(PoolType::kMax, 3, 2, 1), {{{0, 0, 8}}});
    Add("avg_pool", ::ios::testing::PoolOp(PoolType::kAvg, 3, 1, 1), {{{0, 0, 8}}});
    Add("global_max", ::ios::testing::PoolOp(PoolType::kGlobalMax), {{{0, 0, 8}}});
    Add("global_avg", ::ios::testing::PoolOp(PoolType::kGlobalAvg), {{{0, 0, 8}}});
    Add("relu", ::ios::testing::ActOp(Activation::kRelu), {{{0, 0, 8}}});
    Add("sigmoid", ::ios::testing::ActOp(Activation::kSigmoid), {{{0, 0, 8}}});
    Add("add", ::ios::testing::EltwiseOp(EltwiseType::kAdd),
        {{{1, 0, 8}}, {{0, 0, 8}}, {{2, 0, 8}}});
    Add("mul", ::ios::testing::EltwiseOp(EltwiseType::kMul), {{{1, 0, 8}}, {{11, 0, 8}}});
    Add("concat", ::ios::testing::IdentityOp(), {{{1, 0, 8}}, {{2, 0, 8}}});
    Add("summed_slices", ::ios::testing::IdentityOp(), {{{1, 0, 4}, {2, 4, 8}}});
    Add("conv_on_slices", Conv(5, 3, 1), {{{1, 2, 6}}, {{2, 0, 3}, {0, 5, 8}}});
    Add("sep_conv",
        ::ios::testing::SequentialOp({::ios::testing::ActOp(Activation::kRelu),
                                      Conv(8, 3, 1, 1, 1, 8, Activation::kNone), Conv(8, 1, 0)}),
        {{{0, 0, 8}}});
    Add("conv5_for_merge", Conv(6, 5, 2), {{{0, 0, 8}}});
    Add("conv1_after_conv3", Conv(4, 1, 0), {{{1, 0, 8}}});
    // The activations ONNX models brought (common/activation.h).
    Add("conv_relu6", Conv(8, 3, 1, 1, 1, 1, Activation::kRelu6), {{{0, 0, 8}}});
    Add("conv_silu_depthwise", Conv(8, 3, 1, 1, 1, 8, Activation::kSilu), {{{0, 0, 8}}});
    Add("conv_hardswish", Conv(8, 1, 0, 1, 1, 1, Activation::kHardSwish), {{{0, 0, 8}}});
    Add("relu6", ::ios::testing::ActOp(Activation::kRelu6), {{{0, 0, 8}}});
    Add("hardswish_on_slice", ::ios::testing::ActOp(Activation::kHardSwish), {{{1, 2, 6}}});
    Add("silu", ::ios::testing::ActOp(Activation::kSilu), {{{0, 0, 8}}});
    Add("conv_hardsigmoid", Conv(8, 1, 0, 1, 1, 1, Activation::kHardSigmoid), {{{0, 0, 8}}});
    Add("leakyrelu_on_slice", ::ios::testing::ActOp(Activation::kLeakyRelu), {{{1, 2, 6}}});
    Add("conv_leakyrelu", Conv(8, 3, 1, 1, 1, 1, Activation::kLeakyRelu), {{{0, 0, 8}}});
    Add("hardsigmoid", ::ios::testing::ActOp(Activation::kHardSigmoid), {{{0, 0, 8}}});
    Add("conv_gelu", Conv(8, 1, 0, 1, 1, 1, Activation::kGelu), {{{0, 0, 8}}});
    Add("gelu_tanh_on_slice", ::ios::testing::ActOp(Activation::kGeluTanh), {{{1, 2, 6}}});
    // ceil_mode: 9 -> 5 (a last window over the last row and column only).
    Add("max_pool_ceil",
        [] {
          OpParams op = ::ios::testing::PoolOp(PoolType::kMax, 2, 2, 0);
          op.pool.ceil = true;
          return op;
        }(),
        {{{0, 0, 8}}});
    // count_include_pad=0: the divisor counts the taps inside the input.
    Add("avg_pool_excluding_padding",
        [] {
          OpParams op = ::ios::testing::PoolOp(PoolType::kAvg, 3, 2, 1);
          op.pool.exclude_padding = true;
          return op;
        }(),
        {{{0, 0, 8}}});
    // TensorFlow's SAME padding at stride 2 (BlazeFace): one more zero row
    // and column at the bottom and right (ONNX pads [0,0,1,1]): 9 -> 4.
    Add("depthwise_s2_end_padding",
        [] {
          OpParams op = Conv(8, 3, 0, 2, 1, 8);
          op.conv.padding_end_extra = {1, 1};
          return op;
        }(),
        {{{0, 0, 8}}});
    // Kinds of common/op_kinds.h: a classifier's softmax, and its
    // logarithm over a slice (strided views on every backend).
    Add("softmax", MakeRegisteredOp(RegisteredKind::kSoftmax), {{{0, 0, 8}}});
    Add("logsoftmax_on_slice",
        [] {
          OpParams op = MakeRegisteredOp(RegisteredKind::kSoftmax);
          op.registered.attributes = {1};
          return op;
        }(),
        {{{1, 2, 6}}});
    // ShuffleNet's channel shuffle, on a slice and across two terms.
    Add("channel_shuffle_on_slice", MakeRegisteredOp(RegisteredKind::kChannelShuffle),
        {{{1, 2, 6}}});
    Add("channel_shuffle_of_concat",
        [] {
          OpParams op = MakeRegisteredOp(RegisteredKind::kChannelShuffle);
          op.registered.attributes = {3};
          return op;
        }(),
        {{{0, 0, 4}}, {{1, 1, 3}}});
    // ConvNeXt's layer norm over channels, across two terms and on a
    // slice (strided views).
    Add("layernorm_of_concat", MakeRegisteredOp(RegisteredKind::kLayerNorm),
        {{{0, 0, 5}}, {{1, 1, 4}}});
    Add("layernorm_on_slice",
        [] {
          OpParams op = MakeRegisteredOp(RegisteredKind::kLayerNorm);
          SetFloatAttribute(op.registered, "eps", 1e-6f, "layernorm_on_slice");
          return op;
        }(),
        {{{1, 2, 7}}});
    // ONNX's LeakyRelu and HardSigmoid at coefficients other than
    // PyTorch's (the activations' own), on a slice and across two terms.
    Add("leaky_relu_on_slice",
        [] {
          OpParams op = MakeRegisteredOp(RegisteredKind::kLeakyRelu);
          SetFloatAttribute(op.registered, "alpha", 0.2f, "leaky_relu_on_slice");
          return op;
        }(),
        {{{1, 2, 6}}});
    Add("hard_sigmoid_of_concat",
        [] {
          OpParams op = MakeRegisteredOp(RegisteredKind::kHardSigmoid);
          SetFloatAttribute(op.registered, "alpha", 0.5f, "hard_sigmoid_of_concat");
          SetFloatAttribute(op.registered, "beta", 0.25f, "hard_sigmoid_of_concat");
          return op;
        }(),
        {{{0, 0, 5}}, {{1, 1, 4}}});
    // Several outputs of a network as one vector (the importer's end for
    // BlazeFace): each flattened, channels last from a slice and channels
    // first from two terms, into views of the concatenation that reads them.
    Add("flatten_on_slice",
        [] {
          OpParams op = MakeRegisteredOp(RegisteredKind::kFlatten);
          SetAttribute(op.registered, "channels_last", 1, "flatten_on_slice");
          return op;
        }(),
        {{{1, 2, 6}}});
    Add("flatten_of_concat", MakeRegisteredOp(RegisteredKind::kFlatten),
        {{{0, 0, 4}}, {{1, 1, 3}}});
    Add("flattened_outputs", ::ios::testing::IdentityOp(),
        {{{*graph_.Find("flatten_on_slice"), 0, 4 * 9 * 9}},
         {{*graph_.Find("flatten_of_concat"), 0, 6 * 9 * 9}}});
    // A transformer's kinds: attention over the 81 pixels as tokens, its
    // queries, keys and values from two terms; a class token and position
    // embedding (weights of a registered kind) on a slice.
    Add("attention_of_concat",
        [] {
          OpParams op = MakeRegisteredOp(RegisteredKind::kAttention);
          SetAttribute(op.registered, "heads", 2, "attention_of_concat");
          return op;
        }(),
        {{{1, 0, 8}}, {{2, 0, 4}}});
    Add("embed_tokens_on_slice", MakeRegisteredOp(RegisteredKind::kEmbedTokens), {{{1, 2, 6}}});
    // Swin's kinds: shifted-window attention (3x3 windows of the 9x9 map
    // rolled by 1; 2 heads of 2, its queries, keys and values from two
    // terms) and patch merging's space_to_depth by 3 on a slice.
    Add("window_attention_of_concat",
        [] {
          OpParams op = MakeRegisteredOp(RegisteredKind::kWindowAttention);
          SetAttribute(op.registered, "heads", 2, "window_attention_of_concat");
          SetAttribute(op.registered, "window", 3, "window_attention_of_concat");
          SetAttribute(op.registered, "shift", 1, "window_attention_of_concat");
          return op;
        }(),
        {{{1, 0, 8}}, {{2, 0, 4}}});
    Add("space_to_depth_on_slice",
        [] {
          OpParams op = MakeRegisteredOp(RegisteredKind::kSpaceToDepth);
          SetAttribute(op.registered, "block", 3, "space_to_depth_on_slice");
          return op;
        }(),
        {{{1, 2, 6}}});
    // Squeeze-and-excitation's channel scale: a C x 1 x 1 term broadcast.
    Add("channel_scale", ::ios::testing::EltwiseOp(EltwiseType::kMul),
        {{{*graph_.Find("global_avg"), 0, 8}}, {{1, 0, 8}}});
    InferShapes(graph_);
  }

  NodeId operator[](const std::string& name) const { return *graph_.Find(name); }
  const Graph& graph() const { return graph_; }
  int size() const { return static_cast<int>(graph_.nodes.size()); }

  StageSpec Spec(Strategy strategy, std::vector<std::vector<std::string>> groups) const {
    Stage stage;
    stage.strategy = strategy;
    for (const auto& group : groups) {
      stage.groups.emplace_back();
      for (const std::string& name : group) stage.groups.back().push_back((*this)[name]);
    }
    return MakeStageSpec(graph_, stage);
  }

 private:
  void Add(const std::string& name, OpParams op, Inputs inputs) {
    Node node{name, "", std::move(op), std::move(inputs), {}};
    graph_.nodes.push_back(std::move(node));
  }
  Graph graph_;
};

}  // namespace ios::devices
