// What the cpu device's test files share: a builder of one-stage programs
// and the fixture that makes the device.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "devices/cpu/cpu_device.h"
#include "exec/program.h"
#include "exec/weights.h"

namespace ios::devices::cpu_testing {

//! Builds a program of one stage: each buffer in a slot of its own.
struct ProgramBuilder {
  exec::Program program;

  int Buffer(Shape shape) {
    const int slot = static_cast<int>(program.slot_elements.size());
    program.buffers.push_back({shape, slot, "b" + std::to_string(program.buffers.size())});
    program.slot_elements.push_back(int64_t{shape.c} * shape.h * shape.w);
    return static_cast<int>(program.buffers.size()) - 1;
  }
  int Weights(exec::ConvWeights weights) {
    program.weights.push_back(std::move(weights));
    return static_cast<int>(program.weights.size()) - 1;
  }
  exec::Step& Add(exec::Step step, int lane = 0, int stage = 0) {
    if (program.stages.size() <= size_t(stage)) program.stages.resize(stage + 1);
    auto& lanes = program.stages[stage].lanes;
    if (lanes.size() <= size_t(lane)) lanes.resize(lane + 1);
    lanes[lane].steps.push_back(std::move(step));
    return lanes[lane].steps.back();
  }
};

class CpuDeviceTest : public ::testing::Test {
 protected:
  std::unique_ptr<exec::Device> device_ = MakeCpuDevice();
};

}  // namespace ios::devices::cpu_testing
