// Runs the built ios-run (and ios-coordinator) the way a user does: whole
// networks on the CPU under searched schedules, checked against sequential
// execution and the naive reference.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <vector>

#include "tests/onnx/onnx_builder.h"
#include "tests/testing/binaries.h"
#include "tests/testing/process.h"
#include "tests/testing/sanitizers.h"

namespace ios {
namespace {

namespace fs = std::filesystem;
using ::ios::testing::CliResult;
using ::ios::testing::kCoordinator;
using ::ios::testing::kIosRun;
using ::ios::testing::ShellQuote;
using ::ios::testing::WriteFile;
using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;

// One thread per process: ctest runs two tests at once on CI's two cores,
// and OpenMP teams on oversubscribed cores wait on each other.
constexpr const char* kCpu = "--device cpu,threads=1";

class IosRunTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "ios_run_test.XXXXXX").string();
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { fs::remove_all(dir_); }

  CliResult Run(const std::string& binary, const std::string& args, int timeout_s = 600) const {
    CliResult result = ::ios::testing::RunBinary(dir_, binary, args, timeout_s);
    EXPECT_NE(result.exit_code, 124) << "timed out: " << binary << " " << args;
    return result;
  }
  static std::string DataFile(const std::string& name) {
    return ShellQuote((fs::path(IOS_TEST_DATA_DIR) / name).string());
  }
  static json ParseJson(const CliResult& r) {
    try {
      return json::parse(r.out);
    } catch (const json::exception& e) {
      ADD_FAILURE() << "not JSON: " << e.what() << "\n" << r.out << "\n" << r.err;
      return json::object();
    }
  }

  fs::path dir_;
};

TEST_F(IosRunTest, TinyModelEqualsSequentialAndTheNaiveReferenceUnderGreedy) {
  const CliResult r =
      Run(kIosRun, "--model " + DataFile("tiny_model.json") +
                       " --schedule greedy --check --format json --runs 2 " + kCpu + " --db t.db");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const json out = ParseJson(r);
  EXPECT_EQ(out["schedule"], "greedy");
  EXPECT_TRUE(out["check"]["against_sequential"]["passed"].get<bool>()) << out.dump(2);
  ASSERT_TRUE(out["check"]["against_reference"].is_object()) << out.dump(2);
  EXPECT_TRUE(out["check"]["against_reference"]["passed"].get<bool>()) << out.dump(2);
  EXPECT_GT(out["check"]["against_reference"]["max_abs_reference"].get<double>(), 0);
  EXPECT_GT(out["measured_ms"]["median"].get<double>(), 0);
  EXPECT_EQ(out["measured_ms"]["runs"], 2);
  // The cpu has no CUDA graphs: it runs streamed, and says so.
  EXPECT_EQ(out["execution"], "streams");
  EXPECT_EQ(out["streams_ms"], out["measured_ms"]);
  EXPECT_TRUE(out["replay_ms"].is_null());
  EXPECT_GT(out["predicted_ms"].get<double>(), 0);
  EXPECT_GT(out["stages_measured_for_prediction"].get<int>(), 0);
  EXPECT_GT(out["peak_activation_bytes"].get<long long>(), 0);
  // No search ran this schedule end to end into t.db.
  ASSERT_TRUE(out.contains("search_end_to_end")) << out.dump(2);
  EXPECT_TRUE(out["search_end_to_end"].is_null()) << out.dump(2);
}

// Issue 11: an ONNX file brings its weights; --input feeds a given input and
// --expect compares the scheduled and the sequential outputs with a
// reference (here computed by hand: 3*1 + 1*(-1) + 0.5 = 2.5).
TEST_F(IosRunTest, AnOnnxModelRunsWithItsWeightsOnAGivenInputAgainstAnExpectedOutput) {
  onnx_import::testing::OnnxBuilder b(2, 1, 1);
  const std::string y =
      b.Node("Conv", {"input", b.Weight({1, 2, 1, 1}, std::vector<float>{1.0f, -1.0f}),
                      b.Weight({1}, std::vector<float>{0.5f})});
  ASSERT_TRUE(WriteFile(dir_ / "tiny.onnx", b.Bytes(y)));
  const auto floats = [](std::vector<float> v) {
    return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
  };
  ASSERT_TRUE(WriteFile(dir_ / "in.bin", floats({3.0f, 1.0f})));
  ASSERT_TRUE(WriteFile(dir_ / "good.bin", floats({2.5f})));
  ASSERT_TRUE(WriteFile(dir_ / "bad.bin", floats({2.0f})));
  const std::string base =
      std::string("--model tiny.onnx --input in.bin --runs 1 --no-predict ") + kCpu;
  const CliResult good = Run(kIosRun, base + " --expect good.bin --schedule greedy");
  EXPECT_EQ(good.exit_code, 0) << good.out << good.err;
  EXPECT_THAT(good.out, HasSubstr("expect: PASSED"));
  const CliResult bad = Run(kIosRun, base + " --expect bad.bin --format json");
  EXPECT_EQ(bad.exit_code, 1) << bad.out << bad.err;
  const json out = ParseJson(bad);
  EXPECT_FALSE(out["expect"]["passed"].get<bool>());
  EXPECT_NEAR(out["expect"]["schedule_max_abs_diff"].get<double>(), 0.5, 1e-6);
  // An input of the wrong size is one clear line.
  ASSERT_TRUE(WriteFile(dir_ / "short.bin", floats({3.0f})));
  const CliResult wrong = Run(kIosRun, std::string("--model tiny.onnx --input short.bin ") + kCpu);
  EXPECT_EQ(wrong.exit_code, 1);
  EXPECT_THAT(wrong.err, HasSubstr("--input short.bin: 1 float32 values; 2 expected (1x2x1x1"));
  // A model the importer refuses says which node and why.
  onnx_import::testing::OnnxBuilder s(2, 4, 4);
  ASSERT_TRUE(WriteFile(dir_ / "softmax.onnx", s.Bytes(s.Node("Softmax", {"input"}))));
  const CliResult refused = Run(kIosRun, std::string("--model softmax.onnx ") + kCpu);
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_THAT(refused.err, HasSubstr("softmax.onnx: node 'Softmax_t0' (Softmax)"));
}

// --schedule memory runs the order of least peak activation memory
// (memory/network_order.h): its output equals sequential execution, its plan's
// live peak is never above sequential's (below it on RandWire CIFAR), and the
// model's peak equals the plan's live peak (one operator per stage).
TEST_F(IosRunTest, ScheduleMemoryRunsTheLeastPeakOrderAndChecks) {
  for (const char* model : {"squeezenet", "randwire_cifar10"}) {
    SCOPED_TRACE(model);
    const std::string args = std::string("--model ") + model +
                             " --check --no-predict --runs 1 --warmup 0 --format json " + kCpu;
    const CliResult least = Run(kIosRun, args + " --schedule memory");
    ASSERT_EQ(least.exit_code, 0) << least.out << least.err;
    const CliResult sequential = Run(kIosRun, args + " --schedule sequential");
    ASSERT_EQ(sequential.exit_code, 0) << sequential.out << sequential.err;
    const json a = ParseJson(least), b = ParseJson(sequential);
    EXPECT_EQ(a["schedule"], "memory");
    EXPECT_TRUE(a["check"]["passed"].get<bool>()) << a.dump(2);
    const auto live = a["peak_live_activation_bytes"].get<long long>();
    EXPECT_EQ(a["model_peak_activation_bytes"].get<long long>(), live);
    EXPECT_TRUE(a["memory_order"]["optimal"].get<bool>()) << a.dump(2);
    EXPECT_LE(live, a["memory_order"]["kahn_peak_bytes"].get<long long>());
    EXPECT_TRUE(b["memory_order"].is_null());
    if (std::string(model) == "squeezenet") {
      EXPECT_LE(live, b["peak_live_activation_bytes"].get<long long>());
    } else {
      EXPECT_LT(live, b["peak_live_activation_bytes"].get<long long>());
    }
  }
  // The text report names the three figures.
  const CliResult text =
      Run(kIosRun,
          std::string("--model randwire_cifar10 --schedule memory --no-predict --runs 1 ") + kCpu);
  ASSERT_EQ(text.exit_code, 0) << text.out << text.err;
  EXPECT_THAT(text.out, HasSubstr("MiB live at peak"));
  EXPECT_THAT(text.out, HasSubstr("MiB model peak (equals live at peak; least-peak order"));
}

// --rewrite memory (memory/rewrite.h): the model rewritten where the
// least-peak order's part peaks drop, run with derived weights, computes
// what the original computes run sequentially, and its peaks are never
// above the unrewritten run's. darts_cell's one site lowers no part of the
// least-peak order (its cell is one part, whose peak is elsewhere): rejected;
// darts_imagenet's 13 sites lower the network's peak.
TEST_F(IosRunTest, RewriteMemoryLowersThePeakAndChecksAgainstTheOriginal) {
  std::vector<const char*> models = {"darts_cell"};
  // darts_imagenet runs its 250 operators four times: the plain build only
  // (CI time); darts_cell's run exercises the same code under the sanitizers.
  if (!testing::kSanitized) models.push_back("darts_imagenet");
  for (const char* model : models) {
    SCOPED_TRACE(model);
    const std::string args = std::string("--model ") + model +
                             " --schedule memory --check --no-predict --runs 1 --warmup 0 "
                             "--format json " +
                             kCpu;
    const CliResult rewritten = Run(kIosRun, args + " --rewrite memory");
    ASSERT_EQ(rewritten.exit_code, 0) << rewritten.out << rewritten.err;
    const CliResult plain = Run(kIosRun, args);
    ASSERT_EQ(plain.exit_code, 0) << plain.out << plain.err;
    const json a = ParseJson(rewritten), b = ParseJson(plain);
    EXPECT_TRUE(a["check"]["passed"].get<bool>()) << a.dump(2);
    EXPECT_TRUE(a["check"]["against_sequential"]["passed"].get<bool>()) << a.dump(2);
    EXPECT_GT(a["check"]["against_sequential"]["max_abs_reference"].get<double>(), 0);
    EXPECT_THAT(a["check"]["sequential_is"].get<std::string>(), HasSubstr("original"));
    EXPECT_TRUE(b["rewrite"].is_null());
    const json& rw = a["rewrite"];
    // The figures it prints for the original are the unrewritten run's.
    const auto live = a["peak_live_activation_bytes"].get<long long>();
    const auto before = b["peak_live_activation_bytes"].get<long long>();
    EXPECT_EQ(rw["original"]["peak_live_activation_bytes"].get<long long>(), before);
    EXPECT_EQ(rw["original"]["model_peak_activation_bytes"],
              b["model_peak_activation_bytes"].get<long long>());
    EXPECT_EQ(a["model_peak_activation_bytes"].get<long long>(), live);
    EXPECT_EQ(rw["least_peak_after"].get<long long>(), live);
    if (std::string(model) == "darts_cell") {
      EXPECT_EQ(live, before);
      EXPECT_TRUE(rw["accepted"].empty()) << rw.dump(2);
      ASSERT_EQ(rw["rejected"].size(), 1u) << rw.dump(2);
      EXPECT_THAT(rw["rejected"][0]["reason"].get<std::string>(), HasSubstr("does not drop"));
    } else {
      EXPECT_LT(live, before);
      EXPECT_EQ(rw["accepted"].size(), 13u) << rw.dump(2);
      EXPECT_GT(a["stages"].get<int>(), b["stages"].get<int>());  // the partials
    }
  }
  // The text report: a line per site and the peaks before and after.
  const CliResult text =
      Run(kIosRun,
          std::string(
              "--model darts_cell --schedule sequential --rewrite memory --no-predict --runs 1 ") +
              kCpu);
  ASSERT_EQ(text.exit_code, 0) << text.out << text.err;
  EXPECT_THAT(text.out, HasSubstr("rewrite: rejected cell_0 -> cell_1.preprocess1 (channel-wise), "
                                  "4 terms: the largest peak"));
  EXPECT_THAT(text.out, HasSubstr("rewrite: 0 site(s) kept, 1 rejected"));
  EXPECT_THAT(text.out, HasSubstr("(the original network under --schedule sequential -> the "
                                  "rewritten)"));
}

// Issue 21 bug 3: current onnx releases save IR version 10, which ONNX 1.12's
// checker warns about; the warning is a log line and goes to stderr, so that
// stdout of --format json is one JSON document.
TEST_F(IosRunTest, JsonOutputStaysParseableWhenTheRunLogsAWarning) {
  onnx_import::testing::OnnxBuilder b(2, 1, 1);
  const std::string y = b.Node("Conv", {"input", b.Weight({1, 2, 1, 1}, {1.0f, -1.0f})});
  ::onnx::ModelProto model;
  ASSERT_TRUE(model.ParseFromString(b.Bytes(y)));
  model.set_ir_version(10);
  ASSERT_TRUE(WriteFile(dir_ / "ir10.onnx", model.SerializeAsString()));
  const CliResult r =
      Run(kIosRun, std::string("--model ir10.onnx --runs 1 --no-predict --format json ") + kCpu);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_THAT(r.err, HasSubstr("ONNX checker"));  // the warning is said, on stderr
  EXPECT_EQ(ParseJson(r)["schedule"], "sequential");
}

// Issue 21 bug 8: every file ios-run reads gets the model loader's checks
// (a regular file, of a bounded size) before it is read: /dev/zero used to
// be read for about 2 GB and end in a bare std::bad_alloc.
TEST_F(IosRunTest, DevicesAndOversizedFilesAreRefusedBeforeTheyAreRead) {
  ASSERT_TRUE(WriteFile(dir_ / "big.bin", std::string(1 << 20, '\0')));
  const struct {
    std::string args, expected;
  } cases[] = {
      {"--weights /dev/zero", "/dev/zero: not a regular file (a character device)"},
      {"--weights .", ".: not a regular file (a directory)"},
      {"--weights big.bin", "big.bin: 1048576 bytes, more than the"},
      {"--input /dev/zero", "--input /dev/zero: not a regular file (a character device)"},
      {"--expect /dev/zero", "--expect /dev/zero: not a regular file (a character device)"},
      {"--input big.bin", "--input big.bin: 262144 float32 values; 2048 expected"},
  };
  for (const auto& c : cases) {
    const CliResult r = Run(
        kIosRun,
        "--model " + DataFile("tiny_model.json") + " --no-predict --runs 1 " + kCpu + " " + c.args,
        60);
    EXPECT_EQ(r.exit_code, 1) << c.args << "\n" << r.err;
    EXPECT_THAT(r.err, HasSubstr(c.expected)) << c.args;
    EXPECT_THAT(r.err, Not(HasSubstr("bad_alloc"))) << c.args;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
}

TEST_F(IosRunTest, PredictionReusesTheDbOnASecondRun) {
  const std::string args = "--model " + DataFile("tiny_model.json") + " --schedule greedy " + kCpu +
                           " --db t.db --runs 1 --format json";
  ASSERT_EQ(Run(kIosRun, args).exit_code, 0);
  const CliResult again = Run(kIosRun, args);
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(ParseJson(again)["stages_measured_for_prediction"], 0);
}

TEST_F(IosRunTest, BadInputsFailWithOneLine) {
  struct Case {
    std::string args, expected;
    int code;
  };
  const Case cases[] = {
      {"--model no_such_model", "unknown model 'no_such_model'", 1},
      {"--model squeezenet --device sim:v100", "cannot run a network", 1},
      {"--model squeezenet --device gpu", "--device: unknown device 'gpu'", 2},
      {"--schedule sequential", "--model is required", 1},
      {"--model squeezenet --schedule no_such_file.json", "--schedule no_such_file.json", 1},
      {"--model squeezenet --schedule s.json --rewrite memory",
       "--rewrite memory needs --schedule sequential, greedy or memory", 1},
      {"--model squeezenet --rewrite all", "--rewrite", 2},
      {"--model squeezenet --batch 0", "--batch", 2},
      {"--model squeezenet --cuda-graph", "--cuda-graph needs --device cuda", 1},
      {"--model squeezenet --device cuda,math=fp16", "math must be fp32 or tf32", 1},
  };
  for (const Case& c : cases) {
    const CliResult r = Run(kIosRun, c.args + " --no-predict", 60);
    EXPECT_EQ(r.exit_code, c.code) << c.args << "\n" << r.err;
    EXPECT_THAT(r.err, HasSubstr(c.expected)) << c.args;
    EXPECT_EQ(r.out, "") << c.args;
  }
}

// The acceptance check: every zoo model under a schedule with merges
// and concurrent stages (searched on the simulated V100, which is fast)
// computes what sequential execution computes.
class ZooCheckTest : public IosRunTest, public ::testing::WithParamInterface<const char*> {};

TEST_P(ZooCheckTest, IosScheduleEqualsSequentialOnTheCpu) {
  const std::string model = GetParam();
  if (testing::kSanitized && (model == "nasnet" || model == "randwire")) {
    // 45 s each under the sanitizers, for the same kernels and program
    // building that SqueezeNet and Inception V3 exercise there.
    GTEST_SKIP() << model << " is checked by the plain build only (CI time)";
  }
  const CliResult search =
      Run(kCoordinator, "--model " + model + " --device sim:v100 --db sim.db -q --out s.json");
  ASSERT_EQ(search.exit_code, 0) << search.err;
  const CliResult r = Run(kIosRun,
                          "--schedule s.json --check --no-predict --runs 1 --warmup 0 "
                          "--format json " +
                              std::string(kCpu));
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const json out = ParseJson(r);
  EXPECT_TRUE(out["check"]["passed"].get<bool>()) << out.dump(2);
  EXPECT_TRUE(out["check"]["against_sequential"]["passed"].get<bool>()) << out.dump(2);
  EXPECT_GT(out["check"]["against_sequential"]["max_abs_reference"].get<double>(), 0);
  EXPECT_EQ(out["model"], model);
}

INSTANTIATE_TEST_SUITE_P(Zoo, ZooCheckTest,
                         ::testing::Values("squeezenet", "inception_v3", "nasnet", "randwire"));

// An IOS reference schedule (the reference implementation's own output for
// Inception V3 on a V100) runs and computes what sequential execution does.
TEST_F(IosRunTest, IosReferenceScheduleRunsAndEqualsSequential) {
  const fs::path schedule =
      fs::path(IOS_SHARED_DIR) / "fixtures/ios-reference/schedules/inception_v3_v100_bs1.json";
  if (!fs::exists(schedule))
    GTEST_SKIP() << "needs " << schedule << " (../shared beside the clone)";
  const CliResult r =
      Run(kIosRun, "--schedule " + ShellQuote(schedule.string()) +
                       " --check --no-predict --runs 1 --warmup 0 --format json " + kCpu);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const json out = ParseJson(r);
  EXPECT_TRUE(out["check"]["against_sequential"]["passed"].get<bool>()) << out.dump(2);
  EXPECT_EQ(out["stages"], 55);
}

// The README's main job, shortened protocol: SqueezeNet measured on this
// machine's CPU; the same command again measures nothing.
TEST_F(IosRunTest, MainJobOnSqueezeNetMeasuresOnTheCpuAndARerunMeasuresNothing) {
  const std::string search = "--model squeezenet " + std::string(kCpu) +
                             " --db cpu.db --warmup 0 --number 1 --repeat 1 --out s.json";
  const CliResult first = Run(kCoordinator, search);
  ASSERT_EQ(first.exit_code, 0) << first.err;
  EXPECT_THAT(first.out, ::testing::StartsWith("ios-coordinator: searching squeezenet on cpu:"));
  EXPECT_THAT(first.out, HasSubstr("measured latencies"));
  EXPECT_THAT(first.out, Not(HasSubstr("simulated")));
  EXPECT_THAT(first.out, ::testing::ContainsRegex("measured [1-9][0-9]*, reused from DB 0"));

  const CliResult second = Run(kCoordinator, search);
  ASSERT_EQ(second.exit_code, 0) << second.err;
  EXPECT_THAT(second.out, ::testing::ContainsRegex("measured 0, reused from DB [1-9]"));

  // ios-run prices the searched schedule from the same measurements, and
  // shows the end-to-end figure the search's verification stored for it.
  std::smatch returned;
  ASSERT_TRUE(std::regex_search(first.out, returned,
                                std::regex("returned: ([a-z0-9 ]+), ([0-9.]+) ms as measured")))
      << first.out;
  const CliResult run =
      Run(kIosRun, "--schedule s.json --db cpu.db --runs 2 --format json " + std::string(kCpu));
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const json out = ParseJson(run);
  EXPECT_EQ(out["stages_measured_for_prediction"], 0) << out.dump(2);
  EXPECT_GT(out["predicted_ms"].get<double>(), 0);
  const json& figure = out["search_end_to_end"];
  ASSERT_TRUE(figure.is_object()) << out.dump(2);
  EXPECT_EQ(figure["schedule"], returned[1].str());
  char median[32];
  std::snprintf(median, sizeof median, "%.3f", figure["median_ms"].get<double>());
  EXPECT_EQ(median, returned[2].str());
  EXPECT_EQ(figure["settings"], "w2-n1-r10-max30-spread5%-float32");
  const CliResult text =
      Run(kIosRun, "--schedule s.json --db cpu.db --runs 1 " + std::string(kCpu));
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_THAT(text.out,
              HasSubstr("search's end-to-end figure: " + returned[2].str() + " ms (stored 20"));
  // Sequential was verified too: ios-run's own sequential schedule of the
  // model is the same network, and finds its figure.
  const CliResult sequential =
      Run(kIosRun, "--model squeezenet --schedule sequential --db cpu.db --runs 1 --format json " +
                       std::string(kCpu));
  ASSERT_EQ(sequential.exit_code, 0) << sequential.err;
  EXPECT_EQ(ParseJson(sequential)["search_end_to_end"]["schedule"], "sequential") << sequential.out;
}

}  // namespace
}  // namespace ios
