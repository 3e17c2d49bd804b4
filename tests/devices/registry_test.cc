// The device registry: names find their kind, kinds cannot shadow each
// other, and a backend registered from outside devices/ (here, the tests)
// serves a real search through the farm like a built-in one.
#include "devices/registry.h"

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <string>

#include "common/error.h"
#include "common/zoo.h"
#include "coordinator/farm.h"
#include "coordinator/search.h"
#include "db/profile_store.h"
#include "devices/cuda/cuda_device.h"

namespace ios::devices {
namespace {

//! Prices every stage at 1 ms per operator, and counts what it measured.
class CountingBackend final : public Backend {
 public:
  explicit CountingBackend(std::atomic<int>& measured) : measured_(measured) {
    device_.backend = "counting";
    device_.name = "counting test device";
    device_.fingerprint = "counting|v1";
    device_.simulated = true;  // it is made up: reports must say so
  }
  const DeviceInfo& Device() const override { return device_; }
  MeasureResult Measure(const StageSpec& stage, int, const MeasureSettings&) override {
    ++measured_;
    MeasureResult result;
    result.median_ms = stage.OperatorCount();
    result.samples = 1;
    return result;
  }

 private:
  DeviceInfo device_;
  std::atomic<int>& measured_;
};

BackendKind CountingKind(std::atomic<int>& measured) {
  BackendKind kind;
  kind.prefix = "counting";
  kind.grammar = "counting";
  kind.open_backend = [&measured](const std::string&, const BackendOptions&) {
    return std::make_unique<CountingBackend>(measured);
  };
  kind.open_device = [](const std::string& name,
                        const BackendOptions&) -> std::unique_ptr<exec::Device> {
    throw Error(name + " cannot execute");
  };
  return kind;
}

//! A farm whose one embedded worker measures on the counting kind of
//! `registry`, serving the search's `device`.
coordinator::FarmOptions CountingFarm(const Registry& registry, const std::string& device) {
  coordinator::FarmOptions options;
  options.registry = &registry;
  options.local_backend = "counting";
  options.device = device;
  return options;
}

TEST(RegistryTest, EveryBuiltinNameFindsItsKind) {
  const Registry& registry = BuiltinRegistry();
  for (const auto& [name, prefix] :
       std::vector<std::pair<std::string, std::string>>{{"cpu", "cpu"},
                                                        {"cpu,threads=2", "cpu"},
                                                        {"sim:v100", "sim"},
                                                        {"cuda", "cuda"},
                                                        {"cuda:1,math=tf32", "cuda"},
                                                        {"reference", "reference"}}) {
    const BackendKind* kind = registry.Find(name);
    ASSERT_NE(kind, nullptr) << name;
    EXPECT_EQ(kind->prefix, prefix) << name;
  }
  EXPECT_EQ(registry.Find("cpux"), nullptr);  // a prefix is a whole word
  EXPECT_EQ(registry.Find("simulated"), nullptr);
  EXPECT_TRUE(registry.NeedsOwnProcess("cuda:0"));
  EXPECT_FALSE(registry.NeedsOwnProcess("sim:v100"));
  EXPECT_FALSE(registry.NeedsOwnProcess("tpu"));
}

TEST(RegistryTest, AnUnknownNameIsRefusedListingEveryGrammar) {
  try {
    BuiltinRegistry().OpenBackend("tpu:0");
    FAIL() << "expected ios::Error";
  } catch (const Error& e) {
    const std::string message = e.what();
    for (const char* grammar : {"cpu[,threads=N]", "cuda[:GPU]", "sim:v100", "reference"}) {
      EXPECT_NE(message.find(grammar), std::string::npos) << message;
    }
  }
}

TEST(RegistryTest, AKindCannotShadowAnotherOrGoWithoutABackend) {
  std::atomic<int> measured = 0;
  Registry registry = BuiltinRegistry();
  BackendKind sim = CountingKind(measured);
  sim.prefix = "sim";
  EXPECT_THROW(registry.Add(sim), Error);
  BackendKind odd = CountingKind(measured);
  odd.prefix = "count:x";
  EXPECT_THROW(registry.Add(odd), Error);
  BackendKind empty = CountingKind(measured);
  empty.open_backend = nullptr;
  EXPECT_THROW(registry.Add(empty), Error);
  EXPECT_NO_THROW(registry.Add(CountingKind(measured)));
  EXPECT_THROW(registry.Add(CountingKind(measured)), Error);
}

TEST(RegistryTest, SimulatedDevicesRefuseToExecute) {
  try {
    BuiltinRegistry().OpenDevice("sim:v100");
    FAIL() << "expected ios::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot run a network"), std::string::npos) << e.what();
  }
}

TEST(RegistryTest, CostFactsComeFromTheDevicesOwnKind) {
  const DeviceInfo sim = BuiltinRegistry().OpenBackend("sim:v100")->Device();
  EXPECT_GT(BuiltinRegistry().CostFactsOf(sim).serial_op_ms, 0);
  DeviceInfo unknown = sim;
  unknown.backend = "tpu";
  EXPECT_EQ(BuiltinRegistry().CostFactsOf(unknown).serial_op_ms, 0);
}

TEST(RegistryTest, EachKindSaysHowItsDevicesTimeWhateverTheirNamesLookLike) {
  const Registry& registry = BuiltinRegistry();
  EXPECT_EQ(registry.TimingOf("sim:v100"), DeviceTiming::kModelled);
  EXPECT_EQ(registry.TimingOf("cpu"), DeviceTiming::kHostLaunched);
  EXPECT_EQ(registry.TimingOf("cpu,threads=2"), DeviceTiming::kHostLaunched);
  EXPECT_EQ(registry.TimingOf("reference"), DeviceTiming::kHostLaunched);
  EXPECT_EQ(registry.TimingOf("cuda"), DeviceTiming::kGraphReplayed);
  EXPECT_EQ(registry.TimingOf("cuda:1,math=tf32"), DeviceTiming::kGraphReplayed);
  // A kind registered from outside, whatever it is called, says its own.
  std::atomic<int> measured{0};
  Registry extended = registry;
  BackendKind modelled = CountingKind(measured);
  modelled.prefix = "simulacrum";
  modelled.timing = DeviceTiming::kModelled;
  extended.Add(modelled);
  EXPECT_EQ(extended.TimingOf("simulacrum"), DeviceTiming::kModelled);
  EXPECT_EQ(extended.TimingOf("counting"), DeviceTiming::kHostLaunched);
}

TEST(RegistryTest, TheCudaDefaultsReplayWholeGraphsOfTheStagesCopies) {
  // TimedRunsAsExecuted replays ceil(runs / kExecutedCopies) graphs: a
  // number or warm-up that is not a multiple would run copies it does not
  // count.
  const MeasureSettings cuda = DefaultMeasureSettings(BuiltinRegistry().TimingOf("cuda"));
  EXPECT_EQ(cuda.number % kExecutedCopies, 0);
  EXPECT_EQ(cuda.warmup % kExecutedCopies, 0);
}

// The house rule of docs/architecture.md: a new backend is a kind in a
// registry, and every tool path that takes a name works with it.
TEST(RegistryTest, ABackendRegisteredFromTheTestsServesAFarmSearch) {
  std::atomic<int> measured = 0;
  Registry registry = BuiltinRegistry();
  registry.Add(CountingKind(measured));

  coordinator::FarmOptions farm_options = CountingFarm(registry, "counting");
  auto farm = coordinator::Farm::Start(farm_options);
  auto store = db::ProfileStore::Open(":memory:");
  const Graph graph = BuildZooModel("squeezenet");
  coordinator::SearchOptions options;
  const coordinator::SearchOutcome outcome =
      coordinator::RunSearch(graph, "squeezenet", options, *store, *farm);

  EXPECT_GT(measured.load(), 0);
  EXPECT_EQ(farm->Device().backend, "counting");
  // At 1 ms per operator whatever runs together, one stage per operator
  // is as good as any: the IOS schedule costs what sequential costs.
  EXPECT_DOUBLE_EQ(outcome.ios.latency_ms, outcome.sequential.latency_ms);
  EXPECT_DOUBLE_EQ(outcome.sequential.latency_ms, static_cast<double>(graph.nodes.size() - 1));
}

// `--device cuda:1` without --bind starts a worker on GPU 1, which says it
// is a "cuda" device: the ordinal must not keep it from serving.
TEST(RegistryTest, ADeviceOrdinalSelectsWorkersOfItsKind) {
  std::atomic<int> measured = 0;
  Registry registry = BuiltinRegistry();
  registry.Add(CountingKind(measured));
  coordinator::FarmOptions farm_options = CountingFarm(registry, "counting:1");
  farm_options.wait_for_workers = std::chrono::seconds(5);
  auto farm = coordinator::Farm::Start(farm_options);
  auto store = db::ProfileStore::Open(":memory:");
  EXPECT_NO_THROW(
      coordinator::RunSearch(BuildZooModel("squeezenet"), "squeezenet", {}, *store, *farm))
      << "no worker served --device counting:1";
  EXPECT_GT(measured.load(), 0);
}

}  // namespace
}  // namespace ios::devices
