// The cpu device measuring a stage as a schedule executes it
// (StageProtocol::kExecuted): runs with warm and with cold weights compute
// what a plain run computes and take time; a chain stage measures under
// either protocol; the last-level cache it reports comes from sysfs, and
// the search reads it back from the fingerprint. No timing is compared.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "common/stage.h"
#include "devices/cpu/cpu_caches.h"
#include "devices/cpu/cpu_device.h"
#include "devices/exec_backend.h"
#include "devices/registry.h"
#include "exec/program.h"
#include "exec/weights.h"
#include "tests/devices/cpu_device_testing.h"
#include "tests/testing/process.h"

namespace ios::devices {
namespace {

namespace fs = std::filesystem;
using cpu_testing::ProgramBuilder;

// in (8x12x12) -> 3x3 conv to 16 with bias and relu -> out.
struct ConvProgram {
  exec::Program program;
  exec::View out;
};

ConvProgram MakeConvProgram() {
  ProgramBuilder b;
  const int in = b.Buffer({8, 12, 12});
  const int out = b.Buffer({16, 12, 12});
  b.program.inputs = {in};
  exec::Step step;
  step.op.kind = OpKind::kConv;
  step.op.conv.out_channels = 16;
  step.op.conv.kernel = {3, 3};
  step.op.conv.padding = {1, 1};
  step.op.conv.act = Activation::kRelu;
  step.inputs = {{in, 0, 8}};
  step.output = {out, 0, 16};
  step.weights = b.Weights(exec::RandomConvWeights(step.op.conv, 8, 7));
  step.label = "conv";
  b.Add(step);
  b.program.outputs = {step.output};
  return {b.program, step.output};
}

TEST(CpuExecutedRunsTest, WarmAndColdWeightRunsTakeTimeAndComputeWhatAPlainRunComputes) {
  for (const bool cold_stage_runs : {true, false}) {
    const auto device = MakeCpuDevice({.threads = 1, .cold_stage_runs = cold_stage_runs});
    const ConvProgram conv = MakeConvProgram();
    for (const int batch : {1, 2}) {
      auto prepared = device->Prepare(conv.program, batch);
      prepared->Write(0, exec::SeededValues(size_t(batch) * 8 * 12 * 12, 3));
      ASSERT_GE(prepared->TimedRuns(1), 0);
      const std::vector<float> plain = prepared->Read(conv.out);
      for (const bool warm : {false, true}) {
        EXPECT_GT(prepared->TimedRunsAsExecuted(3, warm), 0)
            << "warm weights " << warm << ", batch " << batch;
        // Rewriting the inputs before each run leaves their values alone.
        EXPECT_EQ(prepared->Read(conv.out), plain)
            << "warm weights " << warm << ", batch " << batch;
      }
    }
  }
}

// x (64x56x56) -> relu -> sigmoid: the chain of issue 22's bound evidence.
StageSpec ReluSigmoidChain() {
  OpParams relu, sigmoid;
  relu.kind = sigmoid.kind = OpKind::kActivation;
  relu.act = Activation::kRelu;
  sigmoid.act = Activation::kSigmoid;
  StageSpec spec;
  spec.strategy = Strategy::kParallel;
  spec.externals = {{64, 56, 56}};
  spec.groups = {{{relu, {{SliceRef{true, 0, 0, 64}}}, {64, 56, 56}},
                  {sigmoid, {{SliceRef{false, 0, 0, 64}}}, {64, 56, 56}}}};
  return spec;
}

TEST(CpuExecutedRunsTest, AChainStageMeasuresUnderEitherProtocolAndWeightState) {
  auto backend = MakeExecBackend(MakeCpuDevice({.threads = 1}));
  MeasureSettings settings;
  settings.warmup = 1;
  settings.number = 2;
  settings.repeat = 2;
  for (const StageProtocol protocol : {StageProtocol::kIsolated, StageProtocol::kExecuted}) {
    for (const bool warm : {false, true}) {
      settings.protocol = protocol;
      settings.warm_weights = warm;
      const MeasureResult result = backend->Measure(ReluSigmoidChain(), 1, settings);
      ASSERT_TRUE(result.ok()) << settings.Key() << ": " << result.error_message;
      EXPECT_GT(result.median_ms, 0) << settings.Key();
      EXPECT_EQ(result.samples, 4) << settings.Key();
    }
  }
}

TEST(CpuCachesTest, RangesMergeAndTouchingOrFlushingThemChangesNoValue) {
  EXPECT_EQ(cpu::MergeRanges({{70, 90}, {10, 20}, {20, 30}, {25, 28}, {50, 50}, {60, 71}}),
            (std::vector<cpu::Range>{{10, 30}, {60, 90}}));
  std::vector<float> values = exec::SeededValues(1000, 5);
  const std::vector<float> before = values;
  const auto begin = reinterpret_cast<uintptr_t>(values.data());
  // Unaligned ends: the first and last lines are partly someone else's.
  const std::vector<cpu::Range> ranges{{begin + 4, begin + 4 * 999 - 2}};
  cpu::TouchRanges(ranges);
  EXPECT_EQ(values, before);
  cpu::FlushRanges(ranges);
  EXPECT_EQ(values, before);
}

void WriteText(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path) << text << "\n";
}

void WriteCache(const fs::path& dir, int index, int level, const std::string& type,
                const std::string& size) {
  const fs::path entry = dir / ("index" + std::to_string(index));
  WriteText(entry / "level", std::to_string(level));
  WriteText(entry / "type", type);
  WriteText(entry / "size", size);
}

TEST(CpuCachesTest, TheLastLevelCacheIsTheHighestDataOrUnifiedLevelSysfsDescribes) {
  ::ios::testing::TempDir dir("ios_cpu_caches");
  const fs::path cache = dir.path() / "cache";
  EXPECT_EQ(cpu::LastLevelCacheBytes(cache.string()), 0) << "no directory: unknown";
  WriteCache(cache, 0, 1, "Data", "48K");
  WriteCache(cache, 1, 1, "Instruction", "32K");
  EXPECT_EQ(cpu::LastLevelCacheBytes(cache.string()), 48 << 10);
  WriteCache(cache, 2, 2, "Unified", "1024K");
  WriteCache(cache, 3, 3, "Unified", "32768K");
  EXPECT_EQ(cpu::LastLevelCacheBytes(cache.string()), int64_t{32} << 20);
  // An instruction cache never counts, however high; a size in M is read.
  WriteCache(cache, 4, 4, "Instruction", "64M");
  EXPECT_EQ(cpu::LastLevelCacheBytes(cache.string()), int64_t{32} << 20);
  WriteCache(cache, 5, 4, "Unified", "64M");
  EXPECT_EQ(cpu::LastLevelCacheBytes(cache.string()), int64_t{64} << 20);
  // A size that is not one is no size.
  WriteCache(cache, 5, 4, "Unified", "lots");
  EXPECT_EQ(cpu::LastLevelCacheBytes(cache.string()), int64_t{32} << 20);
}

TEST(CpuCachesTest, TheFingerprintCarriesTheCacheTheSearchWeighsWeightsAgainst) {
  const DeviceInfo info = MakeCpuDevice()->Info();  // a copy: the device is a temporary
  const int64_t bytes = cpu::LastLevelCacheBytes();
  const std::string field =
      "|llc_kib=" + (bytes > 0 ? std::to_string(bytes / 1024) : std::string("unknown")) + "|";
  EXPECT_NE(info.fingerprint.find(field), std::string::npos) << info.fingerprint;
  EXPECT_EQ(StageCostFactsOf(info).cache_bytes, bytes / 1024 * 1024);

  DeviceInfo other = info;
  other.fingerprint = "cpu-v2|model=x|threads=2|cache=cold|llc_kib=32768|fp32";
  EXPECT_EQ(StageCostFactsOf(other).cache_bytes, int64_t{32} << 20);
  other.fingerprint = "cpu-v2|model=x|threads=2|cache=cold|llc_kib=unknown|fp32";
  EXPECT_EQ(StageCostFactsOf(other).cache_bytes, 0);
}

}  // namespace
}  // namespace ios::devices
