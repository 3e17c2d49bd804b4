// The measurement protocol on scripted timers: which runs it asks for and
// what it reports.
#include "exec/protocol.h"

#include <gtest/gtest.h>

#include <deque>
#include <vector>

#include "common/error.h"

namespace ios::exec {
namespace {

//! A timer that returns scripted per-run times (one per call, times runs)
//! and records how many runs each call asked for.
struct ScriptedTimer {
  std::deque<double> per_run_ms;
  double warmup_ms = 1000;  // huge: must never reach the result
  std::vector<int> calls;
  TimedRuns Fn() {
    return [this](int runs) {
      calls.push_back(runs);
      if (calls.size() == 1) return warmup_ms * runs;
      const double t = per_run_ms.empty() ? 1.0 : per_run_ms.front();
      if (!per_run_ms.empty()) per_run_ms.pop_front();
      return t * runs;
    };
  }
};

TEST(ProtocolTest, IosDefaultsTakeMedianAndSpreadOfSixRepeatMeans) {
  ScriptedTimer timer;
  timer.per_run_ms = {5, 1, 4, 2, 3, 6};
  const MeasureResult r = RunProtocol(MeasureSettings{}, timer.Fn());
  EXPECT_EQ(timer.calls, (std::vector<int>{2, 6, 6, 6, 6, 6, 6}));
  EXPECT_DOUBLE_EQ(r.median_ms, 3.5);
  EXPECT_DOUBLE_EQ(r.spread_ms, 5.0);
  EXPECT_EQ(r.samples, 36);
  EXPECT_TRUE(r.ok());
}

TEST(ProtocolTest, NoWarmupCallWhenWarmupIsZero) {
  ScriptedTimer timer;
  timer.per_run_ms = {2, 2, 2};
  timer.warmup_ms = 2;  // the first call is a timed one here
  MeasureSettings settings;
  settings.warmup = 0;
  settings.repeat = 3;
  const MeasureResult r = RunProtocol(settings, timer.Fn());
  EXPECT_EQ(timer.calls.size(), 3u);
  EXPECT_DOUBLE_EQ(r.median_ms, 2.0);
}

TEST(ProtocolTest, AdaptiveRepeatsUntilTheLastWindowIsCalm) {
  // Noisy start, then calm: the window of the last three is 10, 10.1, 10.
  ScriptedTimer timer;
  timer.per_run_ms = {30, 10, 50, 10, 10.1, 10, 99};
  MeasureSettings settings;
  settings.repeat = 3;
  settings.max_repeat = 20;
  settings.max_relative_spread = 0.05;
  const MeasureResult r = RunProtocol(settings, timer.Fn());
  EXPECT_EQ(timer.calls.size(), 1u + 6u);  // stopped before the 99
  EXPECT_DOUBLE_EQ(r.median_ms, 10.0);
  EXPECT_NEAR(r.spread_ms, 0.1, 1e-9);
  EXPECT_EQ(r.samples, 6 * 6);
}

TEST(ProtocolTest, AdaptiveCapReportsTheCalmestWindow) {
  ScriptedTimer timer;
  timer.per_run_ms = {10, 20, 11, 12, 40, 5};
  MeasureSettings settings;
  settings.repeat = 3;
  settings.max_repeat = 6;
  settings.max_relative_spread = 0.01;
  const MeasureResult r = RunProtocol(settings, timer.Fn());
  EXPECT_EQ(timer.calls.size(), 1u + 6u);
  // Windows: {10,20,11} 10/11, {20,11,12} 9/12, {11,12,40} 29/12, {12,40,5} 35/12.
  EXPECT_DOUBLE_EQ(r.median_ms, 12.0);
  EXPECT_DOUBLE_EQ(r.spread_ms, 9.0);
  EXPECT_EQ(r.samples, 36);
}

TEST(ProtocolTest, RefusesSettingsWithoutTimedRuns) {
  ScriptedTimer timer;
  MeasureSettings settings;
  settings.number = 0;
  EXPECT_THROW(RunProtocol(settings, timer.Fn()), Error);
  EXPECT_TRUE(timer.calls.empty());
}

TEST(ProtocolTest, AdaptiveSettingsHaveTheirOwnKey) {
  MeasureSettings settings;
  EXPECT_EQ(settings.Key(), "w2-n6-r6-float32");
  settings.max_repeat = 30;
  settings.max_relative_spread = 0.05;
  EXPECT_EQ(settings.Key(), "w2-n6-r6-max30-spread5%-float32");
}

TEST(ProtocolTest, TheStageProtocolIsPartOfTheKeyAndIsolatedKeysKeepTheirText) {
  MeasureSettings settings;
  settings.max_repeat = 30;
  settings.max_relative_spread = 0.05;
  const std::string isolated = settings.Key();
  EXPECT_EQ(isolated, "w2-n6-r6-max30-spread5%-float32");
  settings.protocol = StageProtocol::kExecuted;
  EXPECT_EQ(settings.Key(), isolated + "-executed-wcold");
  settings.warm_weights = true;
  EXPECT_EQ(settings.Key(), isolated + "-executed-wwarm");
  for (const std::string& key : {isolated, isolated + "-executed-wcold", settings.Key()}) {
    EXPECT_EQ(ProtocolOfSettingsKey(key),
              key == isolated ? StageProtocol::kIsolated : StageProtocol::kExecuted)
        << key;
  }
  EXPECT_EQ(ProtocolOfSettingsKey("w2-n6-r6-float32"), StageProtocol::kIsolated);
}

TEST(ProtocolTest, RealDevicesMeasureAsExecutedByDefaultAndTheSimulatorIsolated) {
  for (DeviceTiming real : {DeviceTiming::kHostLaunched, DeviceTiming::kGraphReplayed}) {
    EXPECT_EQ(DefaultMeasureSettings(real).protocol, StageProtocol::kExecuted) << ToString(real);
    EXPECT_FALSE(DefaultMeasureSettings(real).warm_weights) << ToString(real);
  }
  EXPECT_EQ(DefaultMeasureSettings(DeviceTiming::kModelled).protocol, StageProtocol::kIsolated);
}

TEST(ProtocolTest, EachKindOfTimingHasTheDefaultKeyItsStoredRowsWereMeasuredUnder) {
  // The sim's key, and with it every sim golden and stored sim row, is the
  // one it had before protocols were keyed.
  EXPECT_EQ(DefaultMeasureSettings(DeviceTiming::kModelled).Key(), "w2-n6-r6-float32");
  // The cpu's is the one it had before the kinds had their own defaults.
  EXPECT_EQ(DefaultMeasureSettings(DeviceTiming::kHostLaunched).Key(),
            "w2-n6-r6-max30-spread5%-float32-executed-wcold");
  EXPECT_EQ(DefaultMeasureSettings(DeviceTiming::kGraphReplayed).Key(),
            "w4-n8-r5-max15-spread3%-float32-executed-wcold");
}

TEST(ProtocolTest, GraphReplaysTakeFewerRepeatsUnderATighterSpreadThanHostLaunchedRuns) {
  const MeasureSettings cpu = DefaultMeasureSettings(DeviceTiming::kHostLaunched);
  const MeasureSettings cuda = DefaultMeasureSettings(DeviceTiming::kGraphReplayed);
  EXPECT_TRUE(cuda.Adaptive());
  EXPECT_LT(cuda.repeat, cpu.repeat);
  EXPECT_LT(cuda.max_repeat, cpu.max_repeat);
  EXPECT_LT(cuda.max_relative_spread, cpu.max_relative_spread);
}

TEST(ProtocolTest, GraphReplayDefaultsStopAtFiveQuietRepeats) {
  // The settings as the protocol runs them: after one warm-up call, five
  // repeats within 3% are enough ...
  ScriptedTimer quiet;
  quiet.per_run_ms = {1.00, 1.01, 1.02, 1.00, 1.01};
  const MeasureResult calm =
      RunProtocol(DefaultMeasureSettings(DeviceTiming::kGraphReplayed), quiet.Fn());
  EXPECT_EQ(quiet.calls, (std::vector<int>{4, 8, 8, 8, 8, 8}));
  EXPECT_DOUBLE_EQ(calm.median_ms, 1.01);
  EXPECT_EQ(calm.samples, 40);
  // ... and a noisy replay is repeated up to 15 times, no more.
  ScriptedTimer noisy;
  for (int i = 0; i < 40; ++i) noisy.per_run_ms.push_back(i % 2 == 0 ? 1.0 : 1.1);
  RunProtocol(DefaultMeasureSettings(DeviceTiming::kGraphReplayed), noisy.Fn());
  EXPECT_EQ(noisy.calls.size(), 1u + 15u);
}

}  // namespace
}  // namespace ios::exec
