// The cpu device's transformer kinds (common/op_kinds_transformer.h)
// against the reference device: attention of several heads over a token
// sequence and a 2-D map of tokens, the tokens' embedding with and
// without a class token, Swin's (shifted) window attention and patch
// merging; batch 1 and more, whole buffers and views at channel offsets.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "common/graph.h"
#include "common/op_kinds.h"
#include "common/stage.h"
#include "exec/program.h"
#include "tests/devices/cpu_device_testing.h"
#include "tests/exec/exec_testing.h"
#include "tests/testing/ops.h"

namespace ios::devices {
namespace {

using cpu_testing::CpuDeviceTest;
using cpu_testing::ExpectSameAsReference;
using cpu_testing::OneOp;

OpParams AttentionOp(int heads) {
  OpParams op = MakeRegisteredOp(RegisteredKind::kAttention);
  SetAttribute(op.registered, "heads", heads, "test");
  return op;
}

OpParams EmbedTokensOp(bool class_token) {
  OpParams op = MakeRegisteredOp(RegisteredKind::kEmbedTokens);
  SetAttribute(op.registered, "class_token", class_token ? 1 : 0, "test");
  return op;
}

OpParams WindowAttentionOp(int heads, int window, int shift, bool grid = false) {
  OpParams op = MakeRegisteredOp(RegisteredKind::kWindowAttention);
  SetAttribute(op.registered, "heads", heads, "test");
  SetAttribute(op.registered, "window", window, "test");
  SetAttribute(op.registered, "shift", shift, "test");
  SetAttribute(op.registered, "grid", grid ? 1 : 0, "test");
  return op;
}

OpParams SpaceToDepthOp(int block) {
  OpParams op = MakeRegisteredOp(RegisteredKind::kSpaceToDepth);
  SetAttribute(op.registered, "block", block, "test");
  return op;
}

struct AttentionCase {
  std::string name;
  int heads, depth, h, w;
};

// The float sums of a depth-64 dot product and of a softmax-weighted sum
// over 30 tokens against the reference's doubles.
constexpr double kAttentionTolerance = 1e-5;

TEST_F(CpuDeviceTest, AttentionOfSeveralHeadsMatchesTheReferenceOnViewsAtChannelOffsets) {
  const std::vector<AttentionCase> cases = {
      // ViT-mini: 4 heads of 16 features, its 16 patches and class token.
      {"vit_mini_4x16_17_tokens", 4, 16, 17, 1},
      {"map_of_5x6_tokens_4x8", 4, 8, 5, 6},
      {"odd_depth_3x5", 3, 5, 3, 4},  // no vector width divides 5 or 15
      {"one_head_of_64", 1, 64, 4, 4},
      {"one_token", 2, 4, 1, 1},  // the softmax of one score is 1
  };
  double largest = 0;
  for (const AttentionCase& c : cases) {
    const Shape input{3 * c.heads * c.depth, c.h, c.w};
    for (const bool offsets : {false, true}) {
      const exec::Program program = OneOp(AttentionOp(c.heads), {input}, offsets);
      for (const int batch : {1, 3}) {
        largest =
            std::max(largest, ExpectSameAsReference(*device_, program, batch,
                                                    c.name + (offsets ? " at channel offsets" : ""),
                                                    {kAttentionTolerance}));
      }
    }
  }
  std::ostringstream text;
  text << largest;
  RecordProperty("largest_relative_difference", text.str());
}

struct WindowCase {
  std::string name;
  int heads, depth, window, shift, h, w;
  bool grid = false;
};

double ExpectWindowAttentionMatches(exec::Device& cpu, const WindowCase& c,
                                    const std::vector<bool>& offsets_list,
                                    const std::vector<int>& batches) {
  double largest = 0;
  const Shape input{3 * c.heads * c.depth, c.h, c.w};
  for (const bool offsets : offsets_list) {
    const exec::Program program =
        OneOp(WindowAttentionOp(c.heads, c.window, c.shift, c.grid), {input}, offsets);
    for (const int batch : batches) {
      largest =
          std::max(largest, ExpectSameAsReference(cpu, program, batch,
                                                  c.name + (offsets ? " at channel offsets" : ""),
                                                  {kAttentionTolerance}));
    }
  }
  return largest;
}

TEST_F(CpuDeviceTest, WindowAttentionMatchesTheReferenceWithAndWithoutAShift) {
  const std::vector<WindowCase> cases = {
      {"2x4_window_4_on_8x8", 2, 4, 4, 0, 8, 8},
      {"2x4_window_4_on_8x8_shifted_2", 2, 4, 4, 2, 8, 8},
      // One window: the roll wraps inside it, no window is a plain run.
      {"one_window_shifted_1", 1, 3, 4, 1, 4, 4},
      // 3x2 windows, the shift one short of the window, odd depth.
      {"3x5_window_3_on_9x6_shifted_2", 3, 5, 3, 2, 9, 6},
      {"one_token_windows", 2, 2, 1, 0, 3, 2},  // the softmax of one score is 1
      // MaxViT's grid attention: windows of pixels spread over the map.
      {"grid_2x4_of_4_on_8x8", 2, 4, 4, 0, 8, 8, true},
      {"grid_1x3_of_3_on_9x6", 1, 3, 3, 0, 9, 6, true},
  };
  double largest = 0;
  for (const WindowCase& c : cases) {
    largest = std::max(largest, ExpectWindowAttentionMatches(*device_, c, {false, true}, {1, 3}));
  }
  std::ostringstream text;
  text << largest;
  RecordProperty("largest_relative_difference", text.str());
}

// Swin-T's first stage: 3 heads of 32 in 7x7 windows shifted by 3 over the
// 56x56 map of patches, its every other block.
TEST_F(CpuDeviceTest, SwinTsFirstShiftedWindowAttentionMatchesTheReference) {
  const double largest =
      ExpectWindowAttentionMatches(*device_, {"swin_t_stage_1", 3, 32, 7, 3, 56, 56}, {true}, {1});
  std::ostringstream text;
  text << largest;
  RecordProperty("largest_relative_difference", text.str());
}

TEST_F(CpuDeviceTest, SpaceToDepthEqualsTheReferenceExactlyForBlocksOf2And3) {
  struct Case {
    int block;
    Shape input;
  };
  // Swin's patch merging; an odd block; one output pixel; a block of 1 (a copy).
  for (const Case& c :
       {Case{2, {5, 4, 6}}, Case{3, {3, 6, 9}}, Case{2, {4, 2, 2}}, Case{1, {3, 2, 3}}}) {
    for (const bool offsets : {false, true}) {
      const exec::Program program = OneOp(SpaceToDepthOp(c.block), {c.input}, offsets);
      for (const int batch : {1, 2}) {
        ExpectSameAsReference(*device_, program, batch,
                              RegisteredKeyText(SpaceToDepthOp(c.block).registered) + " of " +
                                  std::to_string(c.input.c) + "x" + std::to_string(c.input.h) +
                                  "x" + std::to_string(c.input.w) +
                                  (offsets ? " at channel offsets" : ""),
                              {0.0});
      }
    }
  }
}

// Swin's stage boundary in one lane: the patches merged, then window
// attention over the merged map reading the merge's output at an offset.
TEST_F(CpuDeviceTest, WindowAttentionAfterPatchMergingMatchesTheReference) {
  cpu_testing::ProgramBuilder b;
  const Shape patches{6, 8, 8};  // merged: 24 channels, queries, keys and values of 2 heads of 4
  const int in = b.Buffer(patches);
  b.program.inputs = {in};
  exec::Step merge;
  merge.op = SpaceToDepthOp(2);
  merge.label = "merge";
  merge.inputs = {{in, 0, patches.c}};
  const int merged = b.Buffer({4 * patches.c + 1, patches.h / 2, patches.w / 2});
  merge.output = {merged, 1, 4 * patches.c};
  exec::Step attention;
  attention.op = WindowAttentionOp(2, 2, 1);
  attention.label = "attention";
  attention.inputs = {merge.output};
  attention.output = {b.Buffer({4 * patches.c / 3, patches.h / 2, patches.w / 2}), 0,
                      4 * patches.c / 3};
  attention.weights = b.Weights(
      exec::RandomOpWeights(attention.op, {4 * patches.c, patches.h / 2, patches.w / 2}, 9));
  b.program.outputs = {merge.output, attention.output};
  b.Add(std::move(merge));
  b.Add(std::move(attention));
  for (const int batch : {1, 3}) {
    ExpectSameAsReference(*device_, b.program, batch, "merge then window attention",
                          {0.0, kAttentionTolerance});
  }
}

TEST_F(CpuDeviceTest, EmbedTokensMatchesTheReferenceExactlyWithAndWithoutAClassToken) {
  // Float additions as the reference makes them: the same bits.
  const std::vector<Shape> inputs = {{16, 4, 4}, {7, 3, 5}, {5, 1, 1}};
  for (const bool class_token : {true, false}) {
    for (const Shape& input : inputs) {
      for (const bool offsets : {false, true}) {
        const exec::Program program = OneOp(EmbedTokensOp(class_token), {input}, offsets);
        for (const int batch : {1, 2}) {
          ExpectSameAsReference(*device_, program, batch,
                                RegisteredKeyText(EmbedTokensOp(class_token).registered) + " of " +
                                    std::to_string(input.c) + "x" + std::to_string(input.h) + "x" +
                                    std::to_string(input.w) +
                                    (offsets ? " at channel offsets" : ""),
                                {0.0});
        }
      }
    }
  }
}

// The weights are uploaded at prepare: a prepared program runs after the
// program (and its weights) are gone.
TEST_F(CpuDeviceTest, EmbedTokensRunsAfterTheProgramItWasPreparedFromIsGone) {
  const exec::Program program = OneOp(EmbedTokensOp(true), {{8, 3, 3}}, true);
  const int batch = 2;
  const std::vector<float> values =
      exec::testing::Ramp(exec::testing::Elements(program.buffers[program.inputs[0]].shape, batch));
  auto reference = exec::MakeReferenceDevice()->Prepare(program, batch);
  reference->Write(program.inputs[0], values);
  reference->TimedRuns(1);
  std::unique_ptr<exec::PreparedProgram> prepared;
  {
    auto copy = std::make_unique<exec::Program>(program);
    prepared = device_->Prepare(*copy, batch);
  }
  prepared->Write(program.inputs[0], values);
  prepared->TimedRuns(2);
  EXPECT_EQ(prepared->Read(program.outputs[0]), reference->Read(program.outputs[0]));
}

// A ViT block's middle: the tokens embedded, then attention over them, in
// one lane, the embedding's output the attention's input.
TEST_F(CpuDeviceTest, AttentionOverEmbeddedTokensMatchesTheReference) {
  cpu_testing::ProgramBuilder b;
  const Shape patches{3 * 2 * 4, 2, 3};  // queries, keys and values of 2 heads of 4
  const int in = b.Buffer(patches);
  b.program.inputs = {in};
  exec::Step embed;
  embed.op = EmbedTokensOp(true);
  embed.label = "embed";
  embed.inputs = {{in, 0, patches.c}};
  const int tokens = b.Buffer({patches.c, patches.h * patches.w + 1, 1});
  embed.output = {tokens, 0, patches.c};
  embed.weights = b.Weights(exec::RandomOpWeights(embed.op, patches, 5));
  exec::Step attention;
  attention.op = AttentionOp(2);
  attention.label = "attention";
  attention.inputs = {embed.output};
  attention.output = {b.Buffer({patches.c / 3 + 1, patches.h * patches.w + 1, 1}), 1,
                      patches.c / 3};
  b.program.outputs = {embed.output, attention.output};
  b.Add(std::move(embed));
  b.Add(std::move(attention));
  for (const int batch : {1, 3}) {
    ExpectSameAsReference(*device_, b.program, batch, "embed then attention",
                          {0.0, kAttentionTolerance});
  }
}

// A ViT block's attention as a network plans it: the queries, keys and
// values written by three convolutions at channel offsets of the buffer the
// attention reads, the attention written at an offset of a concatenation,
// the embedding's weights from the network's weight store.
TEST_F(CpuDeviceTest, AttentionInANetworkReadsAndWritesConcatenationViews) {
  using ::ios::testing::ConvOp;
  using ::ios::testing::IdentityOp;
  exec::testing::GraphBuilder g({8, 3, 3});
  const NodeId tokens = g.Add("tokens", EmbedTokensOp(true), {{g.S(0)}});
  std::vector<Term> qkv;
  for (const char* name : {"q", "k", "v"}) {
    qkv.push_back({g.S(g.Add(name, ConvOp(8, 1, 1, 0, Activation::kNone), {{g.S(tokens)}}))});
  }
  const NodeId attention = g.Add("attention", AttentionOp(2), qkv);
  const NodeId side = g.Add("side", ConvOp(3, 1, 1, 0), {{g.S(tokens)}});
  g.Add("out", IdentityOp(), {{g.S(side)}, {g.S(attention)}});
  const Graph graph = g.Done();
  std::vector<Stage> stages;
  for (NodeId id = 1; id < static_cast<NodeId>(graph.nodes.size()); ++id) {
    stages.push_back(Stage{Strategy::kParallel, {{id}}});
  }
  const exec::Program program =
      exec::BuildNetworkProgram(graph, stages, exec::WeightStore::Random(graph, 7)).program;
  std::vector<int> offsets;  // of the views q, k, v and attention write
  for (const exec::ProgramStage& stage : program.stages) {
    for (const exec::Step& step : stage.lanes.at(0).steps) {
      if (step.label.size() == 1 || step.label == "attention") {
        offsets.push_back(step.output.offset);
      }
    }
  }
  EXPECT_EQ(offsets, (std::vector<int>{0, 8, 16, 3}));
  for (const int batch : {1, 3}) {
    ExpectSameAsReference(*device_, program, batch, "attention between concatenations");
  }
}

}  // namespace
}  // namespace ios::devices
