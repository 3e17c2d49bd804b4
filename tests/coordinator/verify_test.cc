// The search's last step (issue 22, docs/execution.md "Verified
// schedules"): its best candidates run end to end, the fastest as measured
// is returned, and the figures are kept in the profiling DB.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "common/zoo.h"
#include "coordinator/farm.h"
#include "coordinator/report.h"
#include "coordinator/search.h"
#include "db/profile_store.h"
#include "tests/coordinator/search_testing.h"

namespace ios::coordinator {
namespace {

using testing::CountingMeasurer;
using testing::DefaultOptions;
using testing::StagesOf;

SearchOptions VerifyingOptions() {
  SearchOptions options = DefaultOptions();
  options.verify.settings = DefaultVerifySettings(DeviceTiming::kModelled);
  // Every pass, however long the fake search took: what a pass costs is
  // a matter of time, which these tests do not assert on.
  options.verify.budget_fraction = 1e6;
  return options;
}

const VerifiedSchedule* Named(const Verification& v, const std::string& name) {
  for (const VerifiedSchedule& c : v.candidates) {
    if (c.name == name) return &c;
  }
  return nullptr;
}

TEST(VerifyTest, OnTheSimulatorEveryCandidateMeasuresItsPredictionAndTheOptimumIsReturned) {
  const Graph g = BuildZooModel("inception_v3");
  auto store = db::ProfileStore::Open(":memory:");
  CountingMeasurer measurer;
  const SearchOutcome outcome = RunSearch(g, "inception_v3", VerifyingOptions(), *store, measurer);
  const Verification& v = outcome.verification;
  ASSERT_TRUE(v.ran());
  EXPECT_TRUE(v.unverified_reason.empty()) << v.unverified_reason;
  EXPECT_EQ(v.candidates.front().name, "ios");
  ASSERT_NE(Named(v, "greedy"), nullptr);
  ASSERT_NE(Named(v, "sequential"), nullptr);
  ASSERT_NE(Named(v, "alternative 1"), nullptr) << "Inception V3 has concurrent stages to forbid";
  ASSERT_NE(Named(v, "alternative 2"), nullptr) << "two distinct alternatives (the default)";
  EXPECT_EQ(Named(v, "alternative 3"), nullptr);
  // Distinct schedules only, though Inception V3 repeats its blocks' stages.
  for (size_t i = 0; i < v.candidates.size(); ++i) {
    for (size_t j = i + 1; j < v.candidates.size(); ++j) {
      EXPECT_NE(StagesOf(v.candidates[i].schedule), StagesOf(v.candidates[j].schedule))
          << v.candidates[i].name << " and " << v.candidates[j].name;
    }
  }
  for (const VerifiedSchedule& c : v.candidates) {
    ASSERT_TRUE(c.measured.ok()) << c.name << ": " << c.measured.error_message;
    // The simulator's network is the sum of its modelled stages.
    EXPECT_NEAR(c.measured.median_ms, c.schedule.latency_ms, 1e-9 * c.schedule.latency_ms)
        << c.name;
    EXPECT_GE(c.schedule.latency_ms, outcome.ios.latency_ms - 1e-12) << c.name;
    EXPECT_FALSE(c.reused);
  }
  EXPECT_EQ(v.chosen, 0u);
  EXPECT_EQ(outcome.ReturnedName(), "ios");
  EXPECT_EQ(StagesOf(outcome.Returned()), StagesOf(outcome.ios));
  EXPECT_EQ(measurer.networks_asked, static_cast<int64_t>(v.candidates.size()));
  EXPECT_EQ(store->NetworkRuns("inception_v3").size(), v.candidates.size());
  const std::string report = FormatVerification(outcome);
  EXPECT_NE(report.find("SIMULATED"), std::string::npos) << report;
  EXPECT_NE(report.find("<- returned"), std::string::npos) << report;
}

TEST(VerifyTest, ARerunReusesTheStoredFiguresAndMeasuresNoNetwork) {
  const Graph g = BuildZooModel("squeezenet");
  auto store = db::ProfileStore::Open(":memory:");
  CountingMeasurer first, second;
  const SearchOutcome a = RunSearch(g, "squeezenet", VerifyingOptions(), *store, first);
  const SearchOutcome b = RunSearch(g, "squeezenet", VerifyingOptions(), *store, second);
  EXPECT_GT(first.networks_asked, 0);
  EXPECT_EQ(second.networks_asked, 0);
  ASSERT_EQ(b.verification.candidates.size(), a.verification.candidates.size());
  for (size_t i = 0; i < b.verification.candidates.size(); ++i) {
    EXPECT_TRUE(b.verification.candidates[i].reused);
    EXPECT_EQ(b.verification.candidates[i].measured.median_ms,
              a.verification.candidates[i].measured.median_ms);
  }
}

// Times whole networks as a fixed table says, by their number of stages:
// a device where the DP's prices are wrong.
class SkewedNetworks final : public OneAtATimeMeasurer {
 public:
  explicit SkewedNetworks(std::map<size_t, double> ms_by_stages)
      : ms_by_stages_(std::move(ms_by_stages)) {}
  const DeviceInfo& Device() const override { return stages_.Device(); }

 protected:
  MeasureResult MeasureOne(const StageSpec& spec, int batch,
                           const MeasureSettings& settings) override {
    return stages_.Measure(spec, batch, settings);
  }
  MeasureResult MeasureNetworkOne(const NetworkSpec& network, int,
                                  const MeasureSettings&) override {
    MeasureResult result;
    const auto it = ms_by_stages_.find(network.stages.size());
    result.median_ms = it == ms_by_stages_.end() ? 100.0 : it->second;
    result.samples = 1;
    return result;
  }

 private:
  class SimStages {
   public:
    const DeviceInfo& Device() const { return backend_->Device(); }
    MeasureResult Measure(const StageSpec& spec, int batch, const MeasureSettings& settings) {
      return backend_->Measure(spec, batch, settings);
    }

   private:
    std::unique_ptr<devices::Backend> backend_ = devices::CreateSimBackend("v100");
  } stages_;
  std::map<size_t, double> ms_by_stages_;
};

size_t StageCount(const Schedule& s) {
  size_t n = 0;
  for (const auto& block : s.blocks) n += block.size();
  return n;
}

TEST(VerifyTest, TheFastestAsMeasuredIsReturnedEvenWhenTheDpRanksItLast) {
  const Graph g = BuildZooModel("squeezenet");
  // First, the stage counts of greedy and sequential.
  auto probe_store = db::ProfileStore::Open(":memory:");
  CountingMeasurer probe;
  const SearchOutcome priced = RunSearch(g, "squeezenet", VerifyingOptions(), *probe_store, probe);
  const size_t greedy_stages = StageCount(priced.greedy);
  ASSERT_NE(greedy_stages, StageCount(priced.ios));
  SkewedNetworks skewed({{greedy_stages, 0.5}});
  auto store = db::ProfileStore::Open(":memory:");
  const SearchOutcome outcome = RunSearch(g, "squeezenet", VerifyingOptions(), *store, skewed);
  EXPECT_EQ(outcome.ReturnedName(), "greedy");
  EXPECT_EQ(StagesOf(outcome.Returned()), StagesOf(outcome.greedy));
  EXPECT_NE(FormatVerification(outcome).find("returned: greedy"), std::string::npos)
      << FormatVerification(outcome);
}

// A "real" device (not simulated) whose end-to-end figures depend on the
// call: each network's first run is slow, its second fast.
class SecondRunFast final : public Measurer {
 public:
  const DeviceInfo& Device() const override { return device_; }
  void MeasureStream(
      std::vector<const StageSpec*> specs, int batch, const MeasureSettings& settings,
      const std::function<MoreSpecs(std::span<const IndexedResult>)>& on_results) override {
    stages_.MeasureStream(std::move(specs), batch, settings, on_results);
  }
  std::vector<MeasureResult> MeasureNetworks(std::span<const NetworkSpec* const> networks, int,
                                             const MeasureSettings&) override {
    std::vector<MeasureResult> results;
    for (const NetworkSpec* network : networks) {
      order.push_back(network->stages.size());
      MeasureResult r;
      const int runs = ++runs_of[NetworkKey(*network)];
      r.median_ms = static_cast<double>(network->stages.size()) * (runs == 1 ? 2.0 : 1.0);
      r.samples = 10;
      results.push_back(r);
    }
    return results;
  }
  std::vector<size_t> order;  // stage counts of the networks, in the order asked
  std::map<std::string, int> runs_of;

 private:
  DeviceInfo device_{"fake", "fake cpu", "fake|cpu", false};
  CountingMeasurer stages_;
};

TEST(VerifyTest, OnARealDeviceEachCandidateRunsTwiceInAlternatingOrderKeepingItsLowerMedian) {
  const Graph g = BuildZooModel("squeezenet");
  auto store = db::ProfileStore::Open(":memory:");
  SecondRunFast measurer;
  const SearchOutcome outcome = RunSearch(g, "squeezenet", VerifyingOptions(), *store, measurer);
  const auto& candidates = outcome.verification.candidates;
  ASSERT_EQ(measurer.order.size(), 2 * candidates.size());
  for (size_t k = 0; k < candidates.size(); ++k) {
    const size_t stages = StageCount(candidates[k].schedule);
    EXPECT_EQ(measurer.order[k], stages);
    EXPECT_EQ(measurer.order[2 * candidates.size() - 1 - k], stages) << "the second pass reversed";
    EXPECT_EQ(measurer.runs_of.size(), candidates.size());
    EXPECT_EQ(candidates[k].measured.median_ms, static_cast<double>(stages))
        << "the lower median of the two";
  }
}

// Past the budget (0: one pass) the second pass is left out, and the
// report says so.
TEST(VerifyTest, APassPastTheBudgetIsLeftOutAndTheReportSaysSo) {
  const Graph g = BuildZooModel("squeezenet");
  auto store = db::ProfileStore::Open(":memory:");
  SecondRunFast measurer;
  SearchOptions options = VerifyingOptions();
  options.verify.budget_fraction = 0;
  const SearchOutcome outcome = RunSearch(g, "squeezenet", options, *store, measurer);
  const Verification& v = outcome.verification;
  ASSERT_TRUE(v.ran());
  EXPECT_EQ(measurer.order.size(), v.candidates.size()) << "one pass";
  EXPECT_EQ(v.passes_run, 1);
  EXPECT_EQ(v.passes_planned, 2);
  for (const VerifiedSchedule& c : v.candidates) {
    EXPECT_EQ(c.measured.median_ms, 2.0 * static_cast<double>(StageCount(c.schedule)))
        << "the first pass's figure";
  }
  EXPECT_NE(FormatVerification(outcome).find("1 of 2 passes (--verify-budget)"), std::string::npos)
      << FormatVerification(outcome);
}

TEST(VerifyTest, AMeasurerThatCannotRunNetworksLeavesTheOptimumUnverifiedAndSaysSo) {
  // A measurer of stages only: Measurer::MeasureNetworks' default.
  class StagesOnly final : public Measurer {
   public:
    const DeviceInfo& Device() const override { return inner_.Device(); }
    void MeasureStream(
        std::vector<const StageSpec*> specs, int batch, const MeasureSettings& settings,
        const std::function<MoreSpecs(std::span<const IndexedResult>)>& on_results) override {
      inner_.MeasureStream(std::move(specs), batch, settings, on_results);
    }

   private:
    CountingMeasurer inner_;
  } measurer;
  const Graph g = BuildZooModel("squeezenet");
  auto store = db::ProfileStore::Open(":memory:");
  const SearchOutcome outcome = RunSearch(g, "squeezenet", VerifyingOptions(), *store, measurer);
  EXPECT_EQ(outcome.ReturnedName(), "ios");
  EXPECT_NE(outcome.verification.unverified_reason.find("unsupported"), std::string::npos)
      << outcome.verification.unverified_reason;
  EXPECT_NE(FormatVerification(outcome).find("UNVERIFIED"), std::string::npos);
}

TEST(VerifyTest, NoVerifyReturnsTheOptimumAndRunsNothing) {
  const Graph g = BuildZooModel("squeezenet");
  auto store = db::ProfileStore::Open(":memory:");
  CountingMeasurer measurer;
  SearchOptions options = VerifyingOptions();
  options.verify.enabled = false;
  const SearchOutcome outcome = RunSearch(g, "squeezenet", options, *store, measurer);
  EXPECT_FALSE(outcome.verification.ran());
  EXPECT_EQ(measurer.networks_asked, 0);
  EXPECT_EQ(FormatVerification(outcome), "");
  EXPECT_TRUE(store->NetworkRuns("").empty());
}

// Through the farm: the network goes over the wire to a worker thread
// (protocol 6) and comes back measured.
TEST(VerifyTest, NetworksAreMeasuredThroughTheFarmsWorkers) {
  FarmOptions farm_options;
  farm_options.local_workers = 2;
  farm_options.local_backend = "sim:v100";
  farm_options.device = "sim:v100";
  auto farm = Farm::Start(farm_options);
  const Graph g = BuildZooModel("squeezenet");
  auto store = db::ProfileStore::Open(":memory:");
  const SearchOutcome outcome = RunSearch(g, "squeezenet", VerifyingOptions(), *store, *farm);
  ASSERT_TRUE(outcome.verification.ran());
  for (const VerifiedSchedule& c : outcome.verification.candidates) {
    ASSERT_TRUE(c.measured.ok()) << c.name << ": " << c.measured.error_message;
    EXPECT_NEAR(c.measured.median_ms, c.schedule.latency_ms, 1e-9 * c.schedule.latency_ms);
  }
  EXPECT_EQ(outcome.ReturnedName(), "ios");
}

}  // namespace
}  // namespace ios::coordinator
