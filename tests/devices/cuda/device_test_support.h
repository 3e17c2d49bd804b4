// What the cuda device's tests share: a device on the recording fake, the
// checks every test ends with, and running a program as a worker would.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "devices/cuda/cuda_device.h"
#include "exec/program.h"
#include "tests/devices/cuda/channel_view_program.h"
#include "tests/devices/cuda/recording_api.h"
#include "tests/devices/op_network.h"

namespace ios::devices::cuda_testing {

using cuda::testing::Journal;
using cuda::testing::RecordingApi;

inline std::unique_ptr<exec::Device> Device(const std::shared_ptr<Journal>& journal,
                                            const CudaOptions& options = {}) {
  return MakeCudaDevice(std::make_unique<RecordingApi>(journal), options);
}

//! RunChannelViewProgram on a fake that computes, recording into `journal`;
//! the device is gone when this returns, so the journal also shows what it
//! left alive.
inline std::vector<float> RunOnComputingFake(const exec::Program& program,
                                             const std::shared_ptr<Journal>& journal, int batch,
                                             float shift = 0) {
  journal->compute = true;
  auto device = Device(journal);
  return RunChannelViewProgram(*device, program, batch, shift);
}

inline std::string Listed(const std::vector<std::string>& lines) {
  std::string text;
  for (const std::string& line : lines) text += "\n  " + line;
  return text;
}

inline void ExpectNoViolations(const Journal& journal) {
  EXPECT_TRUE(journal.violations.empty()) << Listed(journal.violations);
}

inline void ExpectNothingAlive(const Journal& journal) {
  std::vector<std::string> left;
  for (const auto& [object, kind] : journal.live) left.push_back(kind);
  EXPECT_TRUE(left.empty()) << "still alive:" << Listed(left);
}

//! Between measurements a device keeps its pool (streams, cuDNN handles,
//! events, workspaces, the search's scratch): exactly what `pooled`, a
//! snapshot of the journal's live objects, names is alive.
inline void ExpectOnlyThePoolAlive(const Journal& journal,
                                   const std::map<void*, std::string>& pooled) {
  std::vector<std::string> left;
  for (const auto& [object, kind] : journal.live) {
    if (pooled.count(object) == 0) left.push_back(kind);
  }
  EXPECT_TRUE(left.empty()) << "alive beyond the pool:" << Listed(left);
  EXPECT_EQ(journal.live.size() - left.size(), pooled.size()) << "the pool lost objects";
}

inline int Count(const std::vector<std::string>& calls, const std::string& call) {
  return static_cast<int>(std::count(calls.begin(), calls.end(), call));
}

//! The library calls of the enqueued work recorded so far, by name.
inline std::vector<std::string> OpCalls(const Journal& journal) {
  std::vector<std::string> calls;
  for (const cuda::testing::OpRecord& op : journal.ops) calls.push_back(op.call);
  return calls;
}

//! Prepares `program`, writes its inputs, times two runs, two as executed
//! (copies in a recorded graph), replays two and reads every output: everything a worker and
//! ios-run ask of a device.
inline void Exercise(exec::Device& device, const exec::Program& program, int batch) {
  auto prepared = device.Prepare(program, batch);
  for (int input : program.inputs) {
    const Shape& s = program.buffers.at(input).shape;
    prepared->Write(input, std::vector<float>(static_cast<size_t>(batch) * s.c * s.h * s.w, 1.0f));
  }
  EXPECT_GT(prepared->TimedRuns(2), 0);
  EXPECT_GT(prepared->TimedRunsAsExecuted(2, true), 0);
  ASSERT_TRUE(prepared->CanReplay());
  EXPECT_GT(prepared->TimedReplays(2), 0);
  for (const exec::View& view : program.outputs) {
    const Shape& s = program.buffers.at(view.buffer).shape;
    EXPECT_EQ(prepared->Read(view).size(), static_cast<size_t>(batch) * view.channels * s.h * s.w);
  }
}

}  // namespace ios::devices::cuda_testing
