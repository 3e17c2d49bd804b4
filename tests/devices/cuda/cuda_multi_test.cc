// One inference over several GPUs on the recording fake (docs/gpu.md,
// "Multi-GPU runs"): ios-run's multi-device path hands cuda devices to the
// multi-GPU player, which enqueues every device's stages and the peer copies
// between them from one thread. The recorded calls show the protocol: peer
// access enabled once per pair, the receiver's copy stream waiting on the
// event the sender recorded after the producing stage, the copy of the
// right bytes between the right buffers, and the consumer waiting on the
// copy before its stage; without peer access the copy still happens, and a
// failed copy is an error naming the call and the copy.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/error.h"
#include "coordinator/multi_schedule.h"
#include "devices/cuda/cuda_device.h"
#include "exec/weights.h"
#include "run/multi_device_run.h"
#include "tests/devices/cuda/device_test_support.h"
#include "tests/exec/exec_testing.h"
#include "tests/testing/ops.h"

namespace ios::devices::cuda_testing {
namespace {

using cuda::testing::PeerCopy;
using cuda::testing::StreamRecord;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;

// tests/data/tiny_model.multi.json: device 1 computes 'c' (conv b, conv c)
// and sends it to device 0, which concatenates it into 'out'.
coordinator::LoadedMultiSchedule Tiny() {
  coordinator::LoadedMultiSchedule tiny =
      coordinator::LoadMultiSchedule(std::string(IOS_TEST_DATA_DIR) + "/tiny_model.multi.json");
  tiny.schedule.devices = {"cuda:0", "cuda:1"};
  return tiny;
}

// Devices on one fake machine: `gpus[d]` is device d's GPU.
struct Machine {
  explicit Machine(const std::vector<int>& gpus, int count = 2) {
    journal->devices = count;
    for (int gpu : gpus) {
      CudaOptions options;
      options.gpu = gpu;
      owned.push_back(MakeCudaDevice(std::make_unique<RecordingApi>(journal), options));
      devices.push_back(owned.back().get());
    }
  }
  std::shared_ptr<Journal> journal = std::make_shared<Journal>();
  std::vector<std::unique_ptr<exec::Device>> owned;
  std::vector<exec::Device*> devices;
};

run::MultiDeviceExecution Execute(Machine& m, const Graph& graph,
                                  const coordinator::MultiDeviceSchedule& schedule, int batch = 1,
                                  const MeasureSettings* timing = nullptr) {
  const Shape& in = graph.node(0).output;
  run::MultiRunOptions options;
  options.batch = batch;
  return run::ExecuteMultiDevice(
      m.devices, graph, schedule, exec::WeightStore::Random(graph, 7),
      exec::SeededValues(static_cast<size_t>(batch) * in.c * in.h * in.w, 3), timing, options);
}

// Index of the first record at or after `from` that `match` accepts; -1: none.
template <class F>
int Find(const std::vector<StreamRecord>& t, int from, F match) {
  for (int i = std::max(from, 0); i < static_cast<int>(t.size()); ++i) {
    if (match(t[static_cast<size_t>(i)])) return i;
  }
  return -1;
}

// Index of the last record before `before` that `match` accepts; -1: none.
template <class F>
int FindBefore(const std::vector<StreamRecord>& t, int before, F match) {
  for (int i = before - 1; i >= 0; --i) {
    if (match(t[static_cast<size_t>(i)])) return i;
  }
  return -1;
}

bool IsWork(const StreamRecord& r) {
  return r.call != "cudaEventRecord" && r.call != "cudaStreamWaitEvent" &&
         r.call != "cudaMemcpyPeerAsync";
}

TEST(CudaMultiTest, ACopyWaitsForItsProducerAndItsConsumerWaitsForTheCopy) {
  const coordinator::LoadedMultiSchedule tiny = Tiny();
  Machine m({0, 1});
  const run::MultiDeviceExecution run = Execute(m, tiny.graph, tiny.schedule);
  EXPECT_TRUE(run.device_copies);
  const Journal& j = *m.journal;
  ExpectNoViolations(j);
  // 'c' (16 x 16 x 16 floats) from device 1 on GPU 1 to device 0 on GPU 0:
  // GPU 0 reads GPU 1's memory, so GPU 0 enables access to GPU 1, once.
  EXPECT_THAT(j.peer_enabled, ElementsAre(Pair(0, 1)));
  ASSERT_EQ(j.peer_copies.size(), 1u);
  const PeerCopy& copy = j.peer_copies[0];
  EXPECT_EQ(copy.dst_device, 0);
  EXPECT_EQ(copy.src_device, 1);
  EXPECT_EQ(copy.bytes, size_t{16} * 16 * 16 * 4);

  const std::vector<StreamRecord>& t = j.timeline;
  const int copied_at =
      Find(t, 0, [](const StreamRecord& r) { return r.call == "cudaMemcpyPeerAsync"; });
  ASSERT_GE(copied_at, 0);
  const StreamRecord& c = t[static_cast<size_t>(copied_at)];
  EXPECT_EQ(c.device, 0) << "the copy runs on a stream of the receiving GPU";
  // Right before it on the copy stream: a wait on the producer's event.
  const int waited_at =
      FindBefore(t, copied_at, [&](const StreamRecord& r) { return r.stream == c.stream; });
  ASSERT_GE(waited_at, 0);
  ASSERT_EQ(t[static_cast<size_t>(waited_at)].call, "cudaStreamWaitEvent");
  void* produced = t[static_cast<size_t>(waited_at)].event;
  // That event was recorded on GPU 1 right after the op that wrote 'c'
  // there, on the stream that op ran on: the producing stage's.
  const int recorded_at = FindBefore(t, waited_at, [&](const StreamRecord& r) {
    return r.call == "cudaEventRecord" && r.event == produced;
  });
  ASSERT_GE(recorded_at, 0);
  const StreamRecord& record = t[static_cast<size_t>(recorded_at)];
  EXPECT_EQ(record.device, 1);
  const int wrote_at =
      FindBefore(t, recorded_at, [](const StreamRecord& r) { return r.device == 1 && IsWork(r); });
  ASSERT_GE(wrote_at, 0);
  EXPECT_EQ(t[static_cast<size_t>(wrote_at)].writes, copy.src)
      << t[static_cast<size_t>(wrote_at)].call << " is not the op that computed 'c'";
  EXPECT_EQ(t[static_cast<size_t>(wrote_at)].stream, record.stream);
  // After it on the copy stream: the copy event, which the stream of the
  // stage reading the copied buffer waits on before that stage's work.
  const int marked_at =
      Find(t, copied_at + 1, [&](const StreamRecord& r) { return r.stream == c.stream; });
  ASSERT_GE(marked_at, 0);
  ASSERT_EQ(t[static_cast<size_t>(marked_at)].call, "cudaEventRecord");
  void* copied = t[static_cast<size_t>(marked_at)].event;
  const int read_at = Find(t, 0, [&](const StreamRecord& r) { return r.reads == copy.dst; });
  ASSERT_GE(read_at, 0) << "no op reads the copied tensor";
  const StreamRecord& consumer = t[static_cast<size_t>(read_at)];
  EXPECT_EQ(consumer.device, 0);
  const int joined_at = Find(t, marked_at, [&](const StreamRecord& r) {
    return r.call == "cudaStreamWaitEvent" && r.event == copied && r.stream == consumer.stream;
  });
  ASSERT_GE(joined_at, 0) << "the consumer's stream never waits for the copy";
  EXPECT_LT(joined_at, read_at) << "the consumer reads the copy before waiting for it";
}

TEST(CudaMultiTest, TimedRunsEnablePeerAccessOnceAndStartEachRunAfterEveryDeviceEndedTheLast) {
  const coordinator::LoadedMultiSchedule tiny = Tiny();
  Machine m({0, 1});
  MeasureSettings timing;
  timing.warmup = 0;
  timing.number = 2;
  timing.repeat = 1;
  const run::MultiDeviceExecution run = Execute(m, tiny.graph, tiny.schedule, 1, &timing);
  const Journal& j = *m.journal;
  ExpectNoViolations(j);
  EXPECT_THAT(j.peer_enabled, ElementsAre(Pair(0, 1)));
  EXPECT_EQ(Count(j.calls, "cudaDeviceCanAccessPeer"), 1);
  // The first run, then one timed call of two runs: one copy each.
  ASSERT_EQ(j.peer_copies.size(), 3u);
  EXPECT_GT(run.timing.min_ms, 0);
  // The timed call's second run: device 1 works again only after waiting on
  // an event device 0 recorded after its first run read the copy, so no run
  // overwrites what another device still reads.
  const std::vector<StreamRecord>& t = j.timeline;
  int copy2 = -1;
  for (int i = 0, seen = 0; i < static_cast<int>(t.size()) && copy2 < 0; ++i) {
    if (t[static_cast<size_t>(i)].call == "cudaMemcpyPeerAsync" && ++seen == 2) copy2 = i;
  }
  ASSERT_GE(copy2, 0);
  const int again =
      Find(t, copy2 + 1, [](const StreamRecord& r) { return r.device == 1 && IsWork(r); });
  ASSERT_GE(again, 0);
  const void* received = j.peer_copies[1].dst;
  const int read = FindBefore(t, again, [&](const StreamRecord& r) { return r.reads == received; });
  ASSERT_GT(read, copy2) << "device 0 never read the second copy";
  bool waited = false;
  for (int i = copy2 + 1; i < again; ++i) {
    const StreamRecord& r = t[static_cast<size_t>(i)];
    if (r.device != 1 || r.call != "cudaStreamWaitEvent") continue;
    const int recorded = FindBefore(t, i, [&](const StreamRecord& e) {
      return e.call == "cudaEventRecord" && e.event == r.event;
    });
    waited = waited || (recorded > read && t[static_cast<size_t>(recorded)].device == 0);
  }
  EXPECT_TRUE(waited) << "device 1 starts a run while device 0 may still read its last copy";
}

TEST(CudaMultiTest, CopiesBothWaysEnableEachOrderedPairOnce) {
  // b crosses to GPU 0, c (a's and b's concatenation) to GPU 1, d and e
  // back to GPU 0: four copies, three of them from GPU 1 to GPU 0.
  exec::testing::GraphBuilder b({4, 8, 8}, "crossing");
  const NodeId a = b.Add("a", ::ios::testing::ConvOp(8, 3, 1, 1), {{b.S(0)}});
  const NodeId bb = b.Add("b", ::ios::testing::ConvOp(8, 1), {{b.S(0)}});
  const NodeId c = b.Add("c", ::ios::testing::IdentityOp(), {{b.S(a)}, {b.S(bb)}});
  const NodeId s = b.Add("s", ::ios::testing::IdentityOp(), {{b.S(c, 4, 12)}});
  const NodeId d = b.Add("d", ::ios::testing::ConvOp(8, 1), {{b.S(s)}});
  const NodeId e = b.Add("e", ::ios::testing::PoolOp(PoolType::kMax, 3, 1, 1), {{b.S(bb)}});
  b.Add("f", ::ios::testing::EltwiseOp(EltwiseType::kAdd), {{b.S(d)}, {b.S(e)}});
  const Graph g = b.Done();
  coordinator::MultiDeviceSchedule q =
      coordinator::SingletonMultiSchedule(g, {-1, 0, 1, 0, 1, 1, 1, 0}, 2);
  q.devices = {"cuda:0", "cuda:1"};
  Machine m({0, 1});
  MeasureSettings timing;
  timing.warmup = 1;
  timing.number = 2;
  timing.repeat = 2;
  Execute(m, g, q, 1, &timing);
  ExpectNoViolations(*m.journal);
  EXPECT_THAT(m.journal->peer_enabled, ::testing::UnorderedElementsAre(Pair(0, 1), Pair(1, 0)));
  int to_gpu0 = 0, to_gpu1 = 0;
  for (const PeerCopy& copy : m.journal->peer_copies) {
    (copy.dst_device == 0 ? to_gpu0 : to_gpu1) += 1;
    EXPECT_NE(copy.dst_device, copy.src_device);
  }
  const int runs = 1 + timing.warmup + timing.repeat * timing.number;
  EXPECT_EQ(to_gpu0, 3 * runs);
  EXPECT_EQ(to_gpu1, runs);
}

TEST(CudaMultiTest, GpusWithoutPeerAccessStillCopyThroughTheDriver) {
  const coordinator::LoadedMultiSchedule tiny = Tiny();
  Machine m({0, 1});
  m.journal->no_peer_access = {{0, 1}, {1, 0}};
  const run::MultiDeviceExecution run = Execute(m, tiny.graph, tiny.schedule);
  ExpectNoViolations(*m.journal);
  EXPECT_EQ(Count(m.journal->calls, "cudaDeviceCanAccessPeer"), 1);
  EXPECT_TRUE(m.journal->peer_enabled.empty());
  ASSERT_EQ(m.journal->peer_copies.size(), 1u);
  EXPECT_EQ(run.output.size(), size_t{40} * 16 * 16);
}

TEST(CudaMultiTest, OneGpuTwiceRunsTheSameProtocolWithoutPeerAccess) {
  // ios-run --devices 'cuda:0;cuda:0': two stream sets on one GPU.
  const coordinator::LoadedMultiSchedule tiny = Tiny();
  Machine m({0, 0}, 1);
  Execute(m, tiny.graph, tiny.schedule);
  ExpectNoViolations(*m.journal);
  EXPECT_EQ(Count(m.journal->calls, "cudaDeviceCanAccessPeer"), 0);
  ASSERT_EQ(m.journal->peer_copies.size(), 1u);
  EXPECT_EQ(m.journal->peer_copies[0].src_device, 0);
  EXPECT_EQ(m.journal->peer_copies[0].dst_device, 0);
}

TEST(CudaMultiTest, AChannelViewCrossesAsOneCopyPerSample) {
  // s is channels [4, 12) of c's buffer (16 channels, an alias): at batch 2
  // the 8 channels of each sample are one range, 16 channels apart.
  exec::testing::GraphBuilder b({4, 8, 8}, "sliced");
  const NodeId a = b.Add("a", ::ios::testing::ConvOp(8, 3, 1, 1), {{b.S(0)}});
  const NodeId c0 = b.Add("b", ::ios::testing::ConvOp(8, 1), {{b.S(0)}});
  const NodeId c = b.Add("c", ::ios::testing::IdentityOp(), {{b.S(a)}, {b.S(c0)}});
  const NodeId s = b.Add("s", ::ios::testing::IdentityOp(), {{b.S(c, 4, 12)}});
  b.Add("d", ::ios::testing::ConvOp(8, 1), {{b.S(s)}});
  const Graph g = b.Done();
  coordinator::MultiDeviceSchedule q =
      coordinator::SingletonMultiSchedule(g, {-1, 0, 0, 0, 0, 1}, 2);
  q.devices = {"cuda:0", "cuda:1"};
  Machine m({0, 1});
  Execute(m, g, q, 2);
  ExpectNoViolations(*m.journal);
  const std::vector<PeerCopy>& copies = m.journal->peer_copies;
  ASSERT_EQ(copies.size(), 2u);
  for (const PeerCopy& copy : copies) EXPECT_EQ(copy.bytes, size_t{8} * 8 * 8 * 4);
  EXPECT_EQ(static_cast<const char*>(copies[1].src) - static_cast<const char*>(copies[0].src),
            16 * 8 * 8 * 4);
  EXPECT_EQ(static_cast<char*>(copies[1].dst) - static_cast<char*>(copies[0].dst), 8 * 8 * 8 * 4);
}

TEST(CudaMultiTest, AFailedPeerCopyIsAnErrorNamingTheCallAndTheCopy) {
  const coordinator::LoadedMultiSchedule tiny = Tiny();
  {
    Machine m({0, 1});
    m.journal->answers["cudaMemcpyPeerAsync"] = cuda::Code::kFailure;
    try {
      Execute(m, tiny.graph, tiny.schedule);
      ADD_FAILURE() << "a failed copy went unnoticed";
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), HasSubstr("(16384 bytes): cudaMemcpyPeerAsync failed"));
      EXPECT_THAT(e.what(), HasSubstr("the copy of 'c' from device 1 (cuda:1) to device 0"));
    }
    m.owned.clear();
    ExpectNothingAlive(*m.journal);
  }
}

// A failure at any call of a run over two GPUs (prepare, peer access, the
// copies, the timed runs, the read): an error naming the device and the
// call, returned at once (nothing waits on the host), nothing left alive.
TEST(CudaMultiTest, AFailureAtAnyCallIsAnErrorNamingTheDeviceAndLeavesNothingBehind) {
  const coordinator::LoadedMultiSchedule tiny = Tiny();
  MeasureSettings timing;
  timing.warmup = 0;
  timing.number = 2;
  timing.repeat = 1;
  int calls = 0;
  {
    Machine m({0, 1});
    const int before = m.journal->counted_calls;
    Execute(m, tiny.graph, tiny.schedule, 1, &timing);
    calls = m.journal->counted_calls - before;
  }
  ASSERT_GT(calls, 50);
  for (int k = 1; k <= calls; ++k) {
    Machine m({0, 1});
    m.journal->fail_at = m.journal->counted_calls + k;
    bool threw = false;
    try {
      Execute(m, tiny.graph, tiny.schedule, 1, &timing);
    } catch (const Error& e) {
      threw = true;
      EXPECT_THAT(e.what(), HasSubstr(m.journal->injected + " failed: injected failure"))
          << "call " << k;
      EXPECT_THAT(e.what(), HasSubstr("device ")) << "call " << k;
    }
    // A refused trial of the fused convolution at prepare is not an error
    // (cuda_refusal_test.cc): the first fused call on each device.
    const bool trial = m.journal->injected == "cudnnConvolutionBiasActivationForward";
    EXPECT_TRUE(threw || trial) << "call " << k << " (" << m.journal->injected
                                << ") failed silently";
    m.owned.clear();
    ExpectNothingAlive(*m.journal);
    ExpectNoViolations(*m.journal);
    if (::testing::Test::HasFailure()) break;
  }
}

}  // namespace
}  // namespace ios::devices::cuda_testing
