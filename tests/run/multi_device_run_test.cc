// One inference over several devices: each device plays its stages on its
// own thread, tensors cross as copies, and the output is the single-device
// sequential run's; a copy that never comes fails the run naming it, and a
// failing device stops the others at once.
#include "run/multi_device_run.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/zoo.h"
#include "devices/linked.h"
#include "exec/weights.h"
#include "tests/exec/exec_testing.h"
#include "tests/testing/multi_device.h"
#include "tests/testing/ops.h"

namespace ios::run {
namespace {

using coordinator::MultiDeviceSchedule;
using coordinator::SingletonMultiSchedule;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr double kTolerance = 1e-4;  // ios-run --check's

// Two branches that cross devices both ways: c concatenates a (here) with b
// (received), s is a channel slice of c computed by no step (an alias), d
// reads s on the other device, and f adds what d and e send back.
Graph Crossing() {
  exec::testing::GraphBuilder g({4, 8, 8}, "crossing");
  const NodeId a = g.Add("a", ::ios::testing::ConvOp(8, 3, 1, 1), {{g.S(0)}});
  const NodeId b = g.Add("b", ::ios::testing::ConvOp(8, 1), {{g.S(0)}});
  const NodeId c = g.Add("c", ::ios::testing::IdentityOp(), {{g.S(a)}, {g.S(b)}});
  const NodeId s = g.Add("s", ::ios::testing::IdentityOp(), {{g.S(c, 4, 12)}});
  const NodeId d = g.Add("d", ::ios::testing::ConvOp(8, 1), {{g.S(s)}});
  const NodeId e = g.Add("e", ::ios::testing::PoolOp(PoolType::kMax, 3, 1, 1), {{g.S(b)}});
  g.Add("f", ::ios::testing::EltwiseOp(EltwiseType::kAdd), {{g.S(d)}, {g.S(e)}});
  return g.Done();
}
// Ids: a 1, b 2, c 3, s 4, d 5, e 6, f 7.
const std::vector<int> kCrossingDevices = {-1, 0, 1, 0, 0, 1, 1, 0};

struct Inputs {
  exec::WeightStore weights;
  std::vector<float> input;
};

Inputs InputsFor(const Graph& graph, int batch) {
  const Shape& in = graph.node(0).output;
  return {exec::WeightStore::Random(graph, 7),
          exec::SeededValues(static_cast<size_t>(batch) * in.c * in.h * in.w, 3)};
}

std::vector<exec::Device*> Borrow(const std::vector<std::unique_ptr<exec::Device>>& devices) {
  std::vector<exec::Device*> borrowed;
  for (const auto& d : devices) borrowed.push_back(d.get());
  return borrowed;
}

std::vector<std::unique_ptr<exec::Device>> ReferenceDevices(int count) {
  std::vector<std::unique_ptr<exec::Device>> devices;
  for (int i = 0; i < count; ++i) devices.push_back(exec::MakeReferenceDevice());
  return devices;
}

// The multi-device output against a sequential run on `single`.
void ExpectSameAsSequential(const std::vector<exec::Device*>& devices, exec::Device& single,
                            const Graph& graph, const MultiDeviceSchedule& q, int batch) {
  const Inputs in = InputsFor(graph, batch);
  MultiRunOptions options;
  options.batch = batch;
  MeasureSettings timing;
  timing.warmup = 1;
  timing.number = 1;
  timing.repeat = 2;
  const MultiDeviceExecution multi =
      ExecuteMultiDevice(devices, graph, q, in.weights, in.input, &timing, options);
  const Execution sequential = Execute(single, graph, SequentialNetworkSchedule(graph), in.weights,
                                       batch, in.input, nullptr);
  const Comparison c = Compare(multi.output, sequential.output);
  EXPECT_TRUE(c.Within(kTolerance))
      << "max |difference| " << c.max_abs_diff << " of " << c.max_abs_reference;
  EXPECT_GT(c.max_abs_reference, 0);
  EXPECT_EQ(multi.output_shape, sequential.output_shape);
  EXPECT_EQ(multi.timing.repeats, 2);
  ASSERT_EQ(multi.devices.size(), devices.size());
  int operators = 0;
  for (const DeviceRunSummary& d : multi.devices) {
    EXPECT_GT(d.operators, 0) << d.name;
    operators += d.operators;
  }
  EXPECT_EQ(operators, graph.OperatorCount());
  EXPECT_FALSE(multi.transfers.empty());
}

MultiDeviceSchedule CrossingSchedule(const Graph& g) {
  MultiDeviceSchedule q = SingletonMultiSchedule(g, kCrossingDevices, 2);
  q.devices = {"ref0", "ref1"};
  return q;
}

TEST(MultiDeviceRunTest, CrossingBranchesOnTwoReferenceDevicesEqualTheSequentialRun) {
  const Graph g = Crossing();
  auto devices = ReferenceDevices(2);
  auto single = exec::MakeReferenceDevice();
  ExpectSameAsSequential(Borrow(devices), *single, g, CrossingSchedule(g), 2);
}

TEST(MultiDeviceRunTest, CopiesFollowDeviceOfOncePerProducerAndReceiver) {
  const Graph g = Crossing();
  auto devices = ReferenceDevices(2);
  const Inputs in = InputsFor(g, 1);
  const MultiDeviceExecution run =
      ExecuteMultiDevice(Borrow(devices), g, CrossingSchedule(g), in.weights, in.input, nullptr);
  // b, d, e go to device 0; s (a view of c, computed by no step) to device 1.
  ASSERT_EQ(run.transfers.size(), 4u);
  EXPECT_EQ(run.transfers[0], (coordinator::Transfer{2, 1, 0, 8 * 8 * 8 * 4}));
  EXPECT_EQ(run.transfers[1], (coordinator::Transfer{4, 0, 1, 8 * 8 * 8 * 4}));
  EXPECT_EQ(run.devices[0].received, 3);
  EXPECT_EQ(run.devices[0].sent, 1);
  EXPECT_EQ(run.devices[1].received, 1);
  EXPECT_EQ(run.devices[1].sent, 3);
}

TEST(MultiDeviceRunTest, ACopyThatNeverArrivesFailsTheRunNamingIt) {
  const Graph g = Crossing();
  auto devices = ReferenceDevices(2);
  const Inputs in = InputsFor(g, 1);
  MultiRunOptions options;
  options.transfer_timeout = std::chrono::milliseconds(200);
  options.drop = [](const coordinator::Transfer& t) { return t.producer == 5; };  // d
  EXPECT_THAT(
      [&] {
        ExecuteMultiDevice(Borrow(devices), g, CrossingSchedule(g), in.weights, in.input, nullptr,
                           options);
      },
      ::testing::ThrowsMessage<Error>(
          HasSubstr("device 0 (ref0): the copy of 'd' from device 1 (ref1) to device 0 (ref0) did "
                    "not arrive within 200 ms (run 1)")));
}

// The reference device, except that it cannot run a program in pieces.
class WholeRunsOnly : public exec::Device {
 public:
  const DeviceInfo& Info() const override { return inner_->Info(); }
  std::unique_ptr<exec::PreparedProgram> Prepare(const exec::Program& p, int batch) override {
    struct Prepared : exec::PreparedProgram {
      std::unique_ptr<exec::PreparedProgram> inner;
      void Write(int buffer, std::span<const float> v) override { inner->Write(buffer, v); }
      std::vector<float> Read(const exec::View& view) override { return inner->Read(view); }
      double TimedRuns(int runs) override { return inner->TimedRuns(runs); }
    };
    auto prepared = std::make_unique<Prepared>();
    prepared->inner = inner_->Prepare(p, batch);
    return prepared;
  }

 private:
  std::unique_ptr<exec::Device> inner_ = exec::MakeReferenceDevice();
};

TEST(MultiDeviceRunTest, AFailingDeviceStopsTheOthersAndIsTheOneReported) {
  const Graph g = Crossing();
  auto reference = exec::MakeReferenceDevice();
  WholeRunsOnly failing;
  const Inputs in = InputsFor(g, 1);
  MultiRunOptions options;
  options.transfer_timeout = std::chrono::minutes(10);  // a hang would show as the test's timeout
  try {
    ExecuteMultiDevice({reference.get(), &failing}, g, CrossingSchedule(g), in.weights, in.input,
                       nullptr, options);
    ADD_FAILURE() << "ran";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("device 1 (ref1): this device cannot run a program in pieces"));
    EXPECT_THAT(e.what(), Not(HasSubstr("did not arrive")));
  }
}

TEST(MultiDeviceRunTest, RefusesAScheduleThatDoesNotCheck) {
  const Graph g = Crossing();
  MultiDeviceSchedule q = CrossingSchedule(g);
  std::swap(q.stages[0][0], q.stages[0][1]);  // c before a
  auto devices = ReferenceDevices(2);
  const Inputs in = InputsFor(g, 1);
  EXPECT_THAT(
      [&] { ExecuteMultiDevice(Borrow(devices), g, q, in.weights, in.input, nullptr); },
      ::testing::ThrowsMessage<Error>(HasSubstr("node 'c' does not run after its producer 'a'")));
}

#if defined(IOS_HAVE_CPU_BACKEND)
std::vector<std::unique_ptr<exec::Device>> CpuDevices(const std::vector<std::string>& names) {
  std::vector<std::unique_ptr<exec::Device>> devices;
  for (const std::string& name : names) {
    devices.push_back(devices::LinkedRegistry().OpenDevice(name));
  }
  return devices;
}

// Two one-thread cpu devices, each on its own core where this process may
// run on two (a test may be given one): the copies and waits are the same.
std::vector<std::string> TwoOneThreadCpus() {
  const std::vector<int> cpus = ProcessCpus();
  return cpus.size() >= 2 ? ExpandDeviceList("cpux2", cpus)
                          : std::vector<std::string>{"cpu,threads=1", "cpu,threads=1"};
}

TEST(MultiDeviceRunTest, CrossingBranchesOnTwoOneThreadCpuDevicesEqualTheSequentialRun) {
  const Graph g = Crossing();
  MultiDeviceSchedule q = CrossingSchedule(g);
  // Device 1 runs d and e as one concurrent stage.
  q.stages[1] = {{Strategy::kParallel, {{2}}}, {Strategy::kParallel, {{5}, {6}}}};
  q.devices = TwoOneThreadCpus();
  auto devices = CpuDevices(q.devices);
  auto single = devices::LinkedRegistry().OpenDevice("cpu,threads=1");
  ExpectSameAsSequential(Borrow(devices), *single, g, q, 2);
}

TEST(MultiDeviceRunTest, SqueezenetWithAlternatingBranchesOnTwoOneThreadCpuDevicesIsSequential) {
  const Graph g = BuildZooModel("squeezenet");
  MultiDeviceSchedule q = SingletonMultiSchedule(g, ::ios::testing::AlternateBranches(g, 2), 2);
  q.devices = TwoOneThreadCpus();
  auto devices = CpuDevices(q.devices);
  auto single = devices::LinkedRegistry().OpenDevice("cpu,threads=1");
  ExpectSameAsSequential(Borrow(devices), *single, g, q, 1);
}
#endif

TEST(DeviceListTest, CpuxNGivesEachDeviceItsOwnShareOfTheCores) {
  EXPECT_EQ(ExpandDeviceList("cpux2", {0, 1}),
            (std::vector<std::string>{"cpu,threads=1,cpus=0", "cpu,threads=1,cpus=1"}));
  EXPECT_EQ(ExpandDeviceList("cpu,cache=warmx2", {0, 1, 2, 4, 5}),
            (std::vector<std::string>{"cpu,cache=warm,threads=3,cpus=0-2",
                                      "cpu,cache=warm,threads=2,cpus=4-5"}));
  EXPECT_EQ(ExpandDeviceList("cpux1", {0, 2}),
            (std::vector<std::string>{"cpu,threads=2,cpus=0+2"}));
}

TEST(DeviceListTest, CudaxNGivesEachDeviceItsOwnGpuAndANamedGpuRepeats) {
  EXPECT_EQ(ExpandDeviceList("cudax2", {0}), (std::vector<std::string>{"cuda:0", "cuda:1"}));
  EXPECT_EQ(ExpandDeviceList("cuda,math=tf32x2", {0}),
            (std::vector<std::string>{"cuda:0,math=tf32", "cuda:1,math=tf32"}));
  EXPECT_EQ(ExpandDeviceList("cuda:0x2", {0}), (std::vector<std::string>{"cuda:0", "cuda:0"}));
  EXPECT_EQ(ExpandDeviceList("cuda:0;cuda:0", {0}), (std::vector<std::string>{"cuda:0", "cuda:0"}));
}

TEST(DeviceListTest, SemicolonsSeparateNamesThatHoldCommas) {
  EXPECT_EQ(
      ExpandDeviceList("cpu,threads=1,cpus=1;reference;sim:v100x2", {0, 1}),
      (std::vector<std::string>{"cpu,threads=1,cpus=1", "reference", "sim:v100", "sim:v100"}));
}

TEST(DeviceListTest, RefusesWhatItCannotSplit) {
  const auto refusal = [](const std::string& list) {
    try {
      ExpandDeviceList(list, {0, 1});
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_THAT(refusal("cpux3"), HasSubstr("3 cpu devices need as many cores"));
  EXPECT_THAT(refusal("cpu,threads=2x2"), HasSubstr("sets threads or cpus, which cpuxN decides"));
  EXPECT_THAT(refusal("cpu;;cpu"), HasSubstr("item 1 '': empty"));
  EXPECT_THAT(refusal(""), HasSubstr("item 0 '': empty"));
  EXPECT_THAT(refusal("cpux0"), HasSubstr("the count must be from 1 to 64"));
  EXPECT_THAT(refusal("cpux100"), HasSubstr("the count must be from 1 to 64"));
}

}  // namespace
}  // namespace ios::run
