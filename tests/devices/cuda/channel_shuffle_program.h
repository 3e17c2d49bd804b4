// One channel shuffle (common/op_kinds.h) as a program of its own, on a
// channel view of a wider input into a channel view of a wider output, as
// ShuffleNet's shuffles read a concatenation and write into one. The cuda
// device's tests run it on the recording fake (which computes the copy) and
// the GPU tests on a GPU, both against the reference device; the channels
// around the views hold a sentinel the shuffle must leave alone.
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
constexpr int kShuffleInputOffset = 2;
constexpr int kShuffleOutputOffset = 3;

//! `channels` of h x w in `groups` groups: input buffer 0, output buffer 1,
//! whose whole extent is the program's one output.
inline exec::Program ChannelShuffleProgram(int channels, int groups, int h, int w) {
  const int in_c = kShuffleInputOffset + channels + 1;
  const int out_c = kShuffleOutputOffset + channels + 2;
  exec::Program program;
  program.buffers = {{{in_c, h, w}, 0, "wider input"}, {{out_c, h, w}, 1, "wider output"}};
  program.slot_elements = {int64_t{in_c} * h * w, int64_t{out_c} * h * w};
  program.inputs = {0};
  program.outputs = {{1, 0, out_c}};
  exec::Step step;
  step.op = MakeRegisteredOp(RegisteredKind::kChannelShuffle);
  step.op.registered.attributes = {groups};
  step.inputs = {{0, kShuffleInputOffset, channels}};
  step.output = {1, kShuffleOutputOffset, channels};
  step.label = "shuffle of " + std::to_string(channels) + " in " + std::to_string(groups);
  exec::ProgramStage stage;
  stage.lanes.push_back({{step}});
  program.stages.push_back(stage);
  exec::Validate(program);
  return program;
}

//! Seeded input, the output buffer filled with -7 first, one run: the
//! whole output buffer.
inline std::vector<float> RunChannelShuffle(exec::Device& device, const exec::Program& program,
                                            int batch) {
  auto prepared = device.Prepare(program, batch);
  for (int buffer : {0, 1}) {
    const Shape& s = program.buffers.at(buffer).shape;
    const size_t count = static_cast<size_t>(batch) * s.c * s.h * s.w;
    prepared->Write(buffer,
                    buffer == 0 ? exec::SeededValues(count, 26) : std::vector<float>(count, -7.0f));
  }
  prepared->TimedRuns(1);
  return prepared->Read(program.outputs.at(0));
}

}  // namespace ios::devices
