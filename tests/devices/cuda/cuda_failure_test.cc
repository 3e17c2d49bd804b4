// The cuda device on its error paths, checked against the recording fake:
// an injected failure at any call becomes the right typed error, leaves
// nothing alive or half-captured and the device usable; a sticky error
// loses the device for good; and the fake's own checks see each breach of
// the call protocol they are meant to see.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "devices/exec_backend.h"
#include "exec/program.h"
#include "tests/devices/cuda/device_test_support.h"

namespace ios::devices::cuda_testing {
namespace {

using cuda::Code;
using ::testing::HasSubstr;

MeasureError KindOf(Code code) {
  switch (code) {
    case Code::kOutOfMemory:
      return MeasureError::kOutOfMemory;
    case Code::kUnsupported:
      return MeasureError::kUnsupported;
    default:
      return MeasureError::kBackendFailure;
  }
}

// Every call of a prepare, write, run, replay and read fails once, in turn,
// with each kind of error: the error comes back typed, nothing but the
// device's pool is left alive or half-captured, and the same device then
// works.
TEST(CudaDeviceTest, AFailureAtAnyCallIsTypedLeavesNothingBehindAndTheDeviceWorksAfter) {
  Network net;
  const exec::Program program = exec::StageProgram(
      net.Spec(Strategy::kParallel, {{"conv3", "conv1_after_conv3"}, {"add"}, {"sep_conv"}}));
  for (const Code code : {Code::kOutOfMemory, Code::kUnsupported, Code::kFailure}) {
    auto journal = std::make_shared<Journal>();
    auto device = Device(journal);
    Exercise(*device, program, 2);  // finds the algorithms; later runs reuse them
    const int before = journal->counted_calls;
    Exercise(*device, program, 2);
    const int calls = journal->counted_calls - before;
    ASSERT_GT(calls, 50);
    const std::map<void*, std::string> pooled = journal->live;
    for (int k = 1; k <= calls; ++k) {
      journal->fail_code = code;
      journal->fail_at = journal->counted_calls + k;
      const size_t first_call = journal->calls.size();
      journal->injected.clear();
      bool threw = false;
      try {
        Exercise(*device, program, 2);
      } catch (const exec::ExecError& e) {
        threw = true;
        EXPECT_EQ(e.kind(), KindOf(code)) << "call " << k << ": " << e.what();
        EXPECT_THAT(e.what(), HasSubstr("injected failure"));
      }
      ASSERT_FALSE(journal->injected.empty()) << "call " << k << " was never made";
      if (!threw) {
        // Only a failed allocation of the algorithm search's scratch is
        // recovered from (a smaller one is tried).
        ASSERT_EQ(code, Code::kOutOfMemory)
            << "call " << k << " (" << journal->injected << ") failed silently";
        EXPECT_GE(
            Count({journal->calls.begin() + static_cast<long>(first_call), journal->calls.end()},
                  "cudaMalloc"),
            1);
      }
      journal->fail_at = 0;
      ExpectOnlyThePoolAlive(*journal, pooled);
      Exercise(*device, program, 2);  // usable again
    }
    ExpectNoViolations(*journal);
  }
}

// The same for a device's first prepare, where algorithms are searched.
TEST(CudaDeviceTest, AFailureDuringTheFirstPrepareIsTypedAndLeavesNothingBehind) {
  Network net;
  const exec::Program program =
      exec::StageProgram(net.Spec(Strategy::kParallel, {{"conv3"}, {"grouped_dilated"}}));
  int calls = 0;
  {
    auto journal = std::make_shared<Journal>();
    auto device = Device(journal);
    const int before = journal->counted_calls;
    Exercise(*device, program, 1);
    calls = journal->counted_calls - before;
  }
  for (int k = 1; k <= calls; ++k) {
    auto journal = std::make_shared<Journal>();
    {
      auto device = Device(journal);
      journal->fail_code = Code::kFailure;
      journal->fail_at = journal->counted_calls + k;
      bool threw = false;
      try {
        Exercise(*device, program, 1);
      } catch (const exec::ExecError&) {
        threw = true;
      }
      // The one call whose failure is not an error: a refused trial of the
      // fused convolution at prepare (the first fused call made) means
      // three calls instead (cuda_refusal_test.cc).
      const std::string fused = "cudnnConvolutionBiasActivationForward";
      const bool trial = journal->injected == fused && Count(journal->calls, fused) == 1;
      EXPECT_EQ(threw, !trial) << "call " << k << " (" << journal->injected << ")";
      EXPECT_EQ(journal->counted_calls >= journal->fail_at, true);
      journal->fail_at = 0;
      Exercise(*device, program, 1);
    }
    ExpectNothingAlive(*journal);
    ExpectNoViolations(*journal);
  }
}

// The fake's own checks have teeth: each breach it is meant to see, it sees.
TEST(RecordingApiTest, SeesEachBreachOfTheProtocol) {
  using cuda::Event;
  using cuda::Stream;
  auto breaches = [](auto&& misuse) {
    auto journal = std::make_shared<Journal>();
    RecordingApi api(journal);
    misuse(api);
    return journal->violations;
  };
  // Allocating between two timing events.
  EXPECT_FALSE(breaches([](RecordingApi& api) {
                 Stream s;
                 Event start, end;
                 void* p = nullptr;
                 api.CreateStream(s);
                 api.CreateEvent(start, true);
                 api.CreateEvent(end, true);
                 api.RecordEvent(start, s);
                 api.Malloc(16, p);
                 api.RecordEvent(end, s);
               }).empty());
  // A side stream working in a timed region without a fork, and not joined.
  EXPECT_EQ(breaches([](RecordingApi& api) {
              Stream origin, side;
              Event start, end;
              void* p = nullptr;
              api.Malloc(64, p);
              api.CreateStream(origin);
              api.CreateStream(side);
              api.CreateEvent(start, true);
              api.CreateEvent(end, true);
              api.RecordEvent(start, origin);
              api.CopyStrided(side, static_cast<float*>(p), 0, static_cast<float*>(p), 0, 4, 1,
                              false);
              api.RecordEvent(end, origin);
            }).size(),
            2u);
  // Waiting on an event never recorded; destroying twice; past the end.
  EXPECT_FALSE(breaches([](RecordingApi& api) {
                 Stream s;
                 Event e;
                 api.CreateStream(s);
                 api.CreateEvent(e, false);
                 api.WaitEvent(s, e);
               }).empty());
  EXPECT_FALSE(breaches([](RecordingApi& api) {
                 Stream s;
                 api.CreateStream(s);
                 api.DestroyStream(s);
                 api.DestroyStream(s);
               }).empty());
  EXPECT_FALSE(breaches([](RecordingApi& api) {
                 void* p = nullptr;
                 api.Malloc(64, p);
                 api.CopyToDevice(static_cast<char*>(p) + 32, nullptr, 64);
               }).empty());
  // A capture that ends with a forked stream not joined.
  EXPECT_FALSE(breaches([](RecordingApi& api) {
                 Stream origin, side;
                 Event fork;
                 cuda::Graph graph;
                 void* p = nullptr;
                 api.Malloc(64, p);
                 api.CreateStream(origin);
                 api.CreateStream(side);
                 api.CreateEvent(fork, false);
                 api.BeginCapture(origin);
                 api.RecordEvent(fork, origin);
                 api.WaitEvent(side, fork);
                 api.CopyStrided(side, static_cast<float*>(p), 0, static_cast<float*>(p), 0, 4, 1,
                                 false);
                 api.EndCapture(origin, graph);
               }).empty());
}

// cudnnTransformTensor converts out of place between tensors of one shape;
// channel views of one buffer interleave at batch 2 without sharing an
// element, which is no breach.
TEST(RecordingApiTest, SeesATransformOntoItsOwnElementsOrBetweenShapesThatDiffer) {
  const auto transform = [](const cuda::TensorLayout& x, int y_offset,
                            const cuda::TensorLayout& y) {
    auto journal = std::make_shared<Journal>();
    RecordingApi api(journal);
    cuda::Stream stream;
    cuda::DnnHandle dnn;
    cuda::TensorDesc x_desc, y_desc;
    void* p = nullptr;
    api.Malloc(4096, p);
    api.CreateStream(stream);
    api.CreateDnn(dnn);
    api.SetDnnStream(dnn, stream);
    api.CreateTensor(x, x_desc);
    api.CreateTensor(y, y_desc);
    api.TransformTensor(dnn, x_desc, p, y_desc, static_cast<float*>(p) + y_offset);
    return journal->violations;
  };
  // Channels [0, 2) of a 2 x 4 x 1 x 1 buffer to [2, 4), then to [1, 3).
  const cuda::TensorLayout two{2, 2, 1, 1, 4, 1, 1, 1};
  EXPECT_TRUE(transform(two, 2, two).empty()) << Listed(transform(two, 2, two));
  EXPECT_THAT(transform(two, 1, two), ::testing::ElementsAre(HasSubstr("overlaps the input")));
  EXPECT_THAT(transform(two, 100, cuda::TensorLayout{2, 1, 2, 1, 4, 2, 1, 1}),
              ::testing::ElementsAre(HasSubstr("different shapes")));
}

TEST(CudaDeviceTest, AStickyErrorLosesTheDeviceForGood) {
  Network net;
  const exec::Program program = exec::StageProgram(net.Spec(Strategy::kParallel, {{"conv3"}}));
  auto journal = std::make_shared<Journal>();
  auto device = Device(journal);
  auto prepared = device->Prepare(program, 1);
  journal->fail_code = Code::kDeviceLost;
  journal->fail_at = journal->counted_calls + 2;  // inside the timed run
  EXPECT_THROW(prepared->TimedRuns(1), exec::DeviceLostError);
  prepared.reset();
  journal->fail_at = 0;
  EXPECT_THROW(device->Prepare(program, 1), exec::DeviceLostError);
  device.reset();  // its pool goes with it
  ExpectNothingAlive(*journal);
}

TEST(CudaDeviceTest, ABackendWhoseDeviceIsLostSaysSoAndMeasuresNothingMore) {
  Network net;
  auto journal = std::make_shared<Journal>();
  auto backend = MakeExecBackend(Device(journal));
  const StageSpec spec = net.Spec(Strategy::kParallel, {{"conv3"}});
  ASSERT_TRUE(backend->Measure(spec, 1, MeasureSettings{}).ok());
  EXPECT_FALSE(backend->Lost());
  journal->fail_code = Code::kDeviceLost;
  journal->fail_at = journal->counted_calls + 3;
  const MeasureResult lost = backend->Measure(spec, 1, MeasureSettings{});
  EXPECT_EQ(lost.error, MeasureError::kBackendFailure);
  EXPECT_THAT(lost.error_message, HasSubstr("lost"));
  EXPECT_TRUE(backend->Lost());
  const int calls = journal->counted_calls;
  EXPECT_FALSE(backend->Measure(spec, 1, MeasureSettings{}).ok());
  EXPECT_EQ(journal->counted_calls, calls) << "nothing more is asked of a lost device";
}

}  // namespace
}  // namespace ios::devices::cuda_testing
