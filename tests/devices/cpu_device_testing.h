// What the cpu device's test files share: a builder of one-stage programs,
// the fixture that makes the device, and the comparison with the reference
// device.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <exception>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "devices/cpu/cpu_device.h"
#include "exec/program.h"
#include "exec/weights.h"
#include "tests/exec/exec_testing.h"

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

//! Runs `program` on the cpu device (twice: runs must not depend on each
//! other) and on the reference device with the same seeded inputs, and
//! compares every output: output o within `relative[o]` (0: exactly equal),
//! 1e-4 where `relative` has no entry. Returns the largest difference seen,
//! relative as the tolerance is (to |reference| where that is above 1).
inline double ExpectSameAsReference(exec::Device& cpu, const exec::Program& program, int batch,
                                    const std::string& what,
                                    const std::vector<double>& relative = {}) {
  SCOPED_TRACE(what + " at batch " + std::to_string(batch));
  try {
    exec::Validate(program);
  } catch (const std::exception& e) {
    ADD_FAILURE() << e.what();
    return 0;
  }
  auto mine = cpu.Prepare(program, batch);
  auto reference = exec::MakeReferenceDevice()->Prepare(program, batch);
  for (size_t i = 0; i < program.inputs.size(); ++i) {
    const Shape& s = program.buffers[program.inputs[i]].shape;
    const std::vector<float> values =
        exec::testing::Ramp(exec::testing::Elements(s, batch), 0.13f, 0.05f * float(i));
    mine->Write(program.inputs[i], values);
    reference->Write(program.inputs[i], values);
  }
  mine->TimedRuns(2);
  reference->TimedRuns(1);
  double largest = 0;
  for (size_t o = 0; o < program.outputs.size(); ++o) {
    const std::vector<float> got = mine->Read(program.outputs[o]);
    const std::vector<float> want = reference->Read(program.outputs[o]);
    exec::testing::ExpectClose(got, want, o < relative.size() ? relative[o] : 1e-4,
                               what + " output " + std::to_string(o));
    for (size_t i = 0; i < std::min(got.size(), want.size()); ++i) {
      largest = std::max(
          largest, std::fabs(double{got[i]} - want[i]) / std::max(1.0, std::fabs(double{want[i]})));
    }
  }
  return largest;
}

//! One op whose inputs are views at channel offset 1 of wider buffers and
//! whose output is a view at channel offset 2 of a wider buffer (or whole
//! buffers when `offsets` is false); seeded random weights where it
//! carries some.
inline exec::Program OneOp(const OpParams& op, const std::vector<Shape>& in_shapes, bool offsets) {
  ProgramBuilder b;
  exec::Step step;
  step.op = op;
  step.label = Describe(op);
  const int in_pad = offsets ? 3 : 0, out_pad = offsets ? 2 : 0;
  for (const Shape& s : in_shapes) {
    const int buffer = b.Buffer({s.c + in_pad, s.h, s.w});
    b.program.inputs.push_back(buffer);
    step.inputs.push_back({buffer, offsets ? 1 : 0, s.c});
  }
  // A step's identity of several views sums them (the graph's would concatenate).
  const Shape out =
      op.kind == OpKind::kIdentity ? in_shapes[0] : InferOpOutput(op, in_shapes, step.label);
  step.output = {b.Buffer({out.c + out_pad, out.h, out.w}), out_pad, out.c};
  if (exec::CarriesWeights(op)) {
    step.weights = b.Weights(exec::RandomOpWeights(op, in_shapes[0], 17));
  }
  b.program.outputs = {step.output};
  b.Add(std::move(step));
  return b.program;
}

}  // namespace ios::devices::cpu_testing
