// Running and refusing imported ONNX models in tests (onnx_import_test.cc,
// onnx_import_activation_test.cc).
#pragma once

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/error.h"
#include "exec/device.h"
#include "onnx/onnx_import.h"
#include "run/network_run.h"

namespace ios::onnx_import {

//! The imported network's output for `input` on the naive reference device,
//! under the sequential and the greedy schedule (which must agree).
inline std::vector<float> RunImported(const ImportedModel& model, const std::vector<float>& input) {
  auto device = exec::MakeReferenceDevice();
  const run::Execution sequential =
      run::Execute(*device, model.graph, run::SequentialNetworkSchedule(model.graph), model.weights,
                   1, input, nullptr);
  const run::Execution greedy =
      run::Execute(*device, model.graph, run::GreedyNetworkSchedule(model.graph), model.weights, 1,
                   input, nullptr);
  EXPECT_TRUE(run::Compare(greedy.output, sequential.output).Within(1e-5));
  return sequential.output;
}

inline std::string Refusal(const std::string& bytes) {
  try {
    ImportOnnx(bytes, "model.onnx");
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.find('\n'), std::string::npos) << "one line: " << what;
    EXPECT_THAT(what, ::testing::HasSubstr("model.onnx")) << what;
    return what;
  }
  ADD_FAILURE() << "imported without complaint";
  return {};
}

}  // namespace ios::onnx_import
