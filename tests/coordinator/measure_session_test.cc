// The measure phase's DB side (coordinator/measure_session.cc): results
// are committed a few times a second rather than one transaction per
// delivery, and nothing that arrived is lost when the stream ends early or
// goes quiet.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "common/error.h"
#include "common/zoo.h"
#include "coordinator/search.h"
#include "db/profile_store.h"
#include "devices/sim/sim_backend.h"
#include "tests/coordinator/search_testing.h"

namespace ios::coordinator {
namespace {

using testing::DefaultOptions;

// Hands results to the session the way the farm does, several calls per
// stream, as `script` says: each entry delivers that many results of the
// stream's specs, in order; -1 pauses past the session's commit interval and
// makes an empty delivery (a farm whose workers went quiet); -2 throws (a
// worker lost for good). `seen_stored` records, before each entry, how many
// measurements the store held.
class ScriptedMeasurer final : public Measurer {
 public:
  ScriptedMeasurer(std::vector<int> script, db::ProfileStore& store, const DeviceInfo& device)
      : backend_(devices::CreateSimBackend("v100")),
        script_(std::move(script)),
        store_(store),
        device_(device) {}

  const DeviceInfo& Device() const override { return backend_->Device(); }

  void MeasureStream(
      std::vector<const StageSpec*> specs, int batch_size, const MeasureSettings& settings,
      const std::function<MoreSpecs(std::span<const IndexedResult>)>& on_results) override {
    size_t next = 0;
    for (int step : script_) {
      seen_stored.push_back(Stored(batch_size, settings));
      if (step == -2) throw Error("worker lost");
      std::vector<IndexedResult> results;
      if (step == -1) {
        std::this_thread::sleep_for(std::chrono::milliseconds(400));
      } else {
        for (int i = 0; i < step && next < specs.size(); ++i, ++next) {
          results.push_back({next, backend_->Measure(*specs[next], batch_size, settings)});
        }
      }
      const MoreSpecs more = on_results(results);
      specs.insert(specs.end(), more.begin(), more.end());
    }
    // The rest at once, as a stream that ends well does.
    std::vector<IndexedResult> results;
    for (; next < specs.size(); ++next) {
      results.push_back({next, backend_->Measure(*specs[next], batch_size, settings)});
    }
    if (!results.empty()) on_results(results);
  }

  int64_t Stored(int batch_size, const MeasureSettings& settings) {
    int64_t count = 0;
    store_.ForEachMeasurement(device_.fingerprint, batch_size, settings.Key(),
                              [&](const StageKeyHash&, const MeasureResult&) { ++count; });
    return count;
  }

  std::vector<int64_t> seen_stored;

 private:
  std::unique_ptr<devices::Backend> backend_;
  std::vector<int> script_;
  db::ProfileStore& store_;
  DeviceInfo device_;
};

struct Fixture {
  Graph graph = BuildZooModel("squeezenet");
  SearchOptions options = DefaultOptions();
  SearchPlan plan = PlanSearch(graph, options);
  std::unique_ptr<db::ProfileStore> store = db::ProfileStore::Open(":memory:");
  DeviceInfo device = devices::CreateSimBackend("v100")->Device();
};

TEST(MeasureSessionTest, AStreamThatFailsKeepsEveryResultThatArrived) {
  Fixture f;
  ScriptedMeasurer measurer({3, 4, 5, -2}, *f.store, f.device);
  EXPECT_THROW(MeasureStages(f.graph, f.plan, *f.store, measurer, f.options), Error);
  EXPECT_EQ(measurer.Stored(f.options.batch_size, f.options.settings), 12);
}

TEST(MeasureSessionTest, ResultsHeldBackAreCommittedWhenTheStreamGoesQuiet) {
  Fixture f;
  ScriptedMeasurer measurer({2, 3, -1, 0}, *f.store, f.device);
  const LatencyTable table = MeasureStages(f.graph, f.plan, *f.store, measurer, f.options);
  // Results arriving together are held back (one transaction for many
  // deliveries): nothing is stored after the first two deliveries...
  ASSERT_EQ(measurer.seen_stored.size(), 4u);
  EXPECT_EQ(measurer.seen_stored[1], 0);
  // ...and the five are, once a quiet spell has been reported.
  EXPECT_EQ(measurer.seen_stored[3], 5);
  EXPECT_EQ(table.stats.measured, static_cast<int64_t>(f.plan.stage_count()));
  EXPECT_EQ(measurer.Stored(f.options.batch_size, f.options.settings),
            static_cast<int64_t>(f.plan.stage_count()));
}

}  // namespace
}  // namespace ios::coordinator
