// One registered kind (common/op_kinds.h) as a program of its own, on a
// channel view of a wider input into a channel view of a wider output, as
// ShuffleNet's shuffles and ConvNeXt's norms read a concatenation and write
// into one. The cuda device's tests run it on the recording fake (which
// computes the shuffle's copy, the layer norm and the transformer kinds)
// and the GPU tests on a GPU, both against the reference device; the
// channels around the views hold a sentinel the step must leave alone.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "common/op_kinds.h"
#include "exec/device.h"
#include "exec/program.h"
#include "exec/weights.h"

namespace ios::devices {

//! The channels around the views: the input has this many before and one
//! after its view, the output one more before and two after.
constexpr int kViewInputOffset = 2;
constexpr int kViewOutputOffset = 3;

//! `op` on `channels` of h x w: input buffer 0, output buffer 1 (of the
//! op's output shape, wider), whose whole extent is the program's one
//! output; seeded random weights when the kind carries them.
inline exec::Program ChannelViewProgram(const OpParams& op, int channels, int h, int w,
                                        const std::string& label) {
  const Shape out = SpecOf(op.registered.kind).infer(op.registered, {channels, h, w}, label);
  const int in_c = kViewInputOffset + channels + 1;
  const int out_c = kViewOutputOffset + out.c + 2;
  exec::Program program;
  program.buffers = {{{in_c, h, w}, 0, "wider input"}, {{out_c, out.h, out.w}, 1, "wider output"}};
  program.slot_elements = {int64_t{in_c} * h * w, int64_t{out_c} * out.h * out.w};
  program.inputs = {0};
  program.outputs = {{1, 0, out_c}};
  exec::Step step;
  step.op = op;
  step.inputs = {{0, kViewInputOffset, channels}};
  step.output = {1, kViewOutputOffset, out.c};
  step.label = label;
  if (exec::CarriesWeights(op)) {
    program.weights.push_back(exec::RandomOpWeights(op, {channels, h, w}, 27));
    step.weights = 0;
  }
  exec::ProgramStage stage;
  stage.lanes.push_back({{step}});
  program.stages.push_back(stage);
  exec::Validate(program);
  return program;
}

//! A channel shuffle of `channels` in `groups` groups.
inline exec::Program ChannelShuffleProgram(int channels, int groups, int h, int w) {
  OpParams op = MakeRegisteredOp(RegisteredKind::kChannelShuffle);
  op.registered.attributes = {groups};
  return ChannelViewProgram(
      op, channels, h, w,
      "shuffle of " + std::to_string(channels) + " in " + std::to_string(groups));
}

//! A layer norm over `channels` with `eps`.
inline exec::Program LayerNormProgram(int channels, float eps, int h, int w) {
  OpParams op = MakeRegisteredOp(RegisteredKind::kLayerNorm);
  SetFloatAttribute(op.registered, "eps", eps, "layer norm test");
  return ChannelViewProgram(op, channels, h, w,
                            "layer norm of " + std::to_string(channels) + " channels");
}

//! A flatten of `channels` of h x w, in NHWC order when `channels_last`.
inline exec::Program FlattenProgram(int channels, bool channels_last, int h, int w) {
  OpParams op = MakeRegisteredOp(RegisteredKind::kFlatten);
  SetAttribute(op.registered, "channels_last", channels_last ? 1 : 0, "flatten test");
  return ChannelViewProgram(op, channels, h, w,
                            std::string("flatten") + (channels_last ? ", channels last" : ""));
}

//! Attention of `heads` heads over `channels` (the output's; the input
//! has three times as many) of h x w.
inline exec::Program AttentionProgram(int heads, int channels, int h, int w) {
  OpParams op = MakeRegisteredOp(RegisteredKind::kAttention);
  SetAttribute(op.registered, "heads", heads, "attention test");
  return ChannelViewProgram(op, 3 * channels, h, w,
                            "attention of " + std::to_string(heads) + " heads over " +
                                std::to_string(channels) + " channels of " + std::to_string(h) +
                                "x" + std::to_string(w));
}

//! embed_tokens of `channels` of h x w, with a class token when
//! `class_token`.
inline exec::Program EmbedTokensProgram(int channels, bool class_token, int h, int w) {
  OpParams op = MakeRegisteredOp(RegisteredKind::kEmbedTokens);
  SetAttribute(op.registered, "class_token", class_token ? 1 : 0, "embed_tokens test");
  return ChannelViewProgram(op, channels, h, w,
                            "embed_tokens of " + std::to_string(channels) + "x" +
                                std::to_string(h) + "x" + std::to_string(w) +
                                (class_token ? " with a class token" : ""));
}

//! Swin's window attention of `heads` heads over `channels` (the output's;
//! the input has three times as many) of h x w, in window x window windows
//! of the map rolled by `shift`, or with `grid` MaxViT's grid windows
//! (shift 0); seeded random relative position bias.
inline exec::Program WindowAttentionProgram(int heads, int channels, int window, int shift, int h,
                                            int w, bool grid = false) {
  OpParams op = MakeRegisteredOp(RegisteredKind::kWindowAttention);
  SetAttribute(op.registered, "heads", heads, "window attention test");
  SetAttribute(op.registered, "window", window, "window attention test");
  SetAttribute(op.registered, "shift", shift, "window attention test");
  SetAttribute(op.registered, "grid", grid ? 1 : 0, "window attention test");
  return ChannelViewProgram(
      op, 3 * channels, h, w,
      std::string(grid ? "grid" : "window") + " attention of " + std::to_string(heads) +
          " heads over " + std::to_string(channels) + " channels of " + std::to_string(h) + "x" +
          std::to_string(w) + " in " + std::to_string(window) + "x" + std::to_string(window) +
          (grid ? " grid windows" : " windows shifted by " + std::to_string(shift)));
}

//! space_to_depth of `channels` of h x w by `block`.
inline exec::Program SpaceToDepthProgram(int channels, int block, int h, int w) {
  OpParams op = MakeRegisteredOp(RegisteredKind::kSpaceToDepth);
  SetAttribute(op.registered, "block", block, "space_to_depth test");
  return ChannelViewProgram(op, channels, h, w,
                            "space_to_depth of " + std::to_string(channels) + "x" +
                                std::to_string(h) + "x" + std::to_string(w) + " by " +
                                std::to_string(block));
}

//! Seeded input plus `shift`, the output buffer filled with -7 first, one
//! run: the whole output buffer.
inline std::vector<float> RunChannelViewProgram(exec::Device& device, const exec::Program& program,
                                                int batch, float shift = 0) {
  auto prepared = device.Prepare(program, batch);
  for (int buffer : {0, 1}) {
    const Shape& s = program.buffers.at(buffer).shape;
    const size_t count = static_cast<size_t>(batch) * s.c * s.h * s.w;
    std::vector<float> values = exec::SeededValues(count, 26);
    for (float& v : values) v = buffer == 0 ? v + shift : -7.0f;
    prepared->Write(buffer, values);
  }
  prepared->TimedRuns(1);
  return prepared->Read(program.outputs.at(0));
}

}  // namespace ios::devices
