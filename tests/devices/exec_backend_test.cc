// The exec backend times a stage with the method its settings' protocol
// names: a recording device says which one ran.
#include "devices/exec_backend.h"

#include <gtest/gtest.h>

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "common/stage.h"

namespace ios::devices {
namespace {

struct Calls {
  std::vector<std::string> made;
};

class RecordingProgram : public exec::PreparedProgram {
 public:
  explicit RecordingProgram(Calls& calls) : calls_(calls) {}
  void Write(int, std::span<const float>) override {}
  std::vector<float> Read(const exec::View&) override { return {}; }
  double TimedRuns(int runs) override { return Record("TimedRuns", runs); }
  double TimedColdRuns(int runs) override { return Record("TimedColdRuns", runs); }
  double TimedRunsAsExecuted(int runs, bool warm_weights) override {
    return Record(std::string("TimedRunsAsExecuted/") + (warm_weights ? "warm" : "cold"), runs);
  }

 private:
  double Record(const std::string& method, int runs) {
    calls_.made.push_back(method);
    return 0.5 * runs;
  }
  Calls& calls_;
};

class RecordingDevice : public exec::Device {
 public:
  explicit RecordingDevice(Calls& calls) : calls_(calls) {
    info_ = {"recording", "recording", "recording|v1", false};
  }
  const DeviceInfo& Info() const override { return info_; }
  std::unique_ptr<exec::PreparedProgram> Prepare(const exec::Program&, int) override {
    return std::make_unique<RecordingProgram>(calls_);
  }

 private:
  Calls& calls_;
  DeviceInfo info_;
};

StageSpec OneRelu() {
  OpParams relu;
  relu.kind = OpKind::kActivation;
  relu.act = Activation::kRelu;
  StageSpec spec;
  spec.externals = {{4, 5, 5}};
  spec.groups = {{{relu, {{SliceRef{true, 0, 0, 4}}}, {4, 5, 5}}}};
  return spec;
}

TEST(ExecBackendTest, TimesEachRunWithTheMethodOfTheSettingsProtocol) {
  struct Case {
    StageProtocol protocol;
    bool warm_weights;
    std::string method;
  };
  for (const Case& c : {Case{StageProtocol::kIsolated, false, "TimedColdRuns"},
                        Case{StageProtocol::kIsolated, true, "TimedColdRuns"},
                        Case{StageProtocol::kExecuted, false, "TimedRunsAsExecuted/cold"},
                        Case{StageProtocol::kExecuted, true, "TimedRunsAsExecuted/warm"}}) {
    Calls calls;
    auto backend = MakeExecBackend(std::make_unique<RecordingDevice>(calls));
    MeasureSettings settings;
    settings.warmup = 1;
    settings.number = 2;
    settings.repeat = 3;
    settings.protocol = c.protocol;
    settings.warm_weights = c.warm_weights;
    const MeasureResult result = backend->Measure(OneRelu(), 1, settings);
    ASSERT_TRUE(result.ok()) << settings.Key() << ": " << result.error_message;
    EXPECT_DOUBLE_EQ(result.median_ms, 0.5) << settings.Key();
    ASSERT_FALSE(calls.made.empty()) << settings.Key();
    for (const std::string& method : calls.made) EXPECT_EQ(method, c.method) << settings.Key();
  }
}

}  // namespace
}  // namespace ios::devices
