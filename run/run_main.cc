// ios-run: runs a whole network under a schedule on a real device, reports
// its end-to-end latency beside the DP's prediction from the profiling DB
// and its peak activation memory, and checks its output.
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "common/error.h"
#include "common/input_file.h"
#include "common/model_source.h"
#include "common/printable.h"
#include "coordinator/multi_schedule.h"
#include "coordinator/report_input.h"
#include "coordinator/schedule_json.h"
#include "devices/linked.h"
#include "exec/device.h"
#include "onnx/model_loader.h"
#include "run/float_files.h"
#include "run/multi_device_cli.h"
#include "run/network_run.h"
#include "run/run_memory.h"
#include "run/run_outputs.h"
#include "run/run_prediction.h"
#include "run/run_report.h"

namespace {

using namespace ios;

struct CliOptions {
  std::string model;
  std::string schedule = "sequential";
  std::string device = "cpu";
  std::string db = "ios-farm.db";
  std::string weights_file;
  std::string input_file;   // raw float32 input (N,C,H,W); default: seeded
  std::string expect_file;  // raw float32 reference output to match
  std::string format = "text";
  std::string rewrite = "none";
  int batch = 1;
  int runs = 10;
  int warmup = 2;
  uint64_t seed = 1;
  bool check = false;
  bool predict = true;
  bool cuda_graph = false;
  bool streams = false;
  bool device_given = false;
  std::string report;   // --report FILE.html
  std::string devices;  // a multi-device schedule's devices (run/multi_device_run.h)
  int transfer_timeout_s = 120;
};

// Relative tolerance of --check: schedules change the order of floating-point
// sums (merged kernels, other algorithms), never the arithmetic.
constexpr double kCheckTolerance = 1e-4;
// A GPU against the cpu backend: other libraries, other algorithms (FFT and
// Winograd convolutions round differently), strict FP32 on both sides.
constexpr double kCrossDeviceTolerance = 1e-3;

// --expect: our output against another framework's (PyTorch through ONNX),
// relative to the largest |value| of the reference.
constexpr double kExpectTolerance = 1e-3;

struct Loaded {
  Graph graph;
  std::string model_name;
  std::optional<exec::WeightStore> file_weights;  // an ONNX file's own
  bool input_channels_last = false;               // an ONNX file's input is N,H,W,C
  std::vector<onnx_import::ModelOutput> outputs;  // an ONNX file's, in order
  run::NetworkSchedule schedule;
  std::optional<MeasureSettings> settings;                // the search's, from a schedule file
  std::optional<coordinator::LoadedMultiSchedule> multi;  // an ios-farm-multi/v1 file's
  std::optional<memory::NetworkOrder> memory_order;       // --schedule memory's search
  //! --rewrite memory: `graph` is the rewritten network, `original` the
  //! model's (its weights are file_weights, --weights' or seeded).
  std::optional<run::MemoryRewriteRun> rewrite;
  std::optional<Graph> original;
};

Loaded LoadInputs(const CliOptions& cli) {
  Loaded loaded;
  const bool named =
      cli.schedule == "sequential" || cli.schedule == "greedy" || cli.schedule == "memory";
  if (cli.rewrite != "none" && !named) {
    // A file's stages name the original graph's nodes; rewriting renames.
    throw Error("--rewrite " + cli.rewrite +
                " needs --schedule sequential, greedy or memory (the schedule is made for the "
                "rewritten graph), not the file " +
                cli.schedule);
  }
  if (named) {
    if (cli.model.empty()) throw Error("--model is required with --schedule " + cli.schedule);
    ModelWithWeights model = LoadAnyModel(cli.model);
    for (const std::string& warning : model.warnings) spdlog::warn("{}", warning);
    loaded.graph = std::move(model.model.graph);
    loaded.model_name = model.model.name;
    loaded.file_weights = std::move(model.weights);
    loaded.input_channels_last = model.input_channels_last;
    loaded.outputs = std::move(model.outputs);
    if (cli.rewrite == "memory") {
      loaded.rewrite = run::RewriteForMemory(loaded.graph, cli.schedule, cli.batch);
      loaded.original = std::move(loaded.graph);
      loaded.graph = loaded.rewrite->rewrite.rewritten.graph;
    }
    loaded.schedule =
        run::NamedSchedule(loaded.graph, cli.schedule, cli.batch, &loaded.memory_order);
    return loaded;
  }
  coordinator::LoadedSchedule file;
  try {
    if (coordinator::IsMultiScheduleFile(cli.schedule)) {
      loaded.multi = coordinator::LoadMultiSchedule(cli.schedule);
      file.graph = loaded.multi->graph;
    } else {
      file = coordinator::LoadSchedule(cli.schedule);
    }
  } catch (const Error& e) {
    throw Error("--schedule " + std::string(e.what()));
  }
  loaded.graph = std::move(file.graph);
  loaded.model_name = loaded.multi ? loaded.multi->info.model : loaded.graph.name;
  loaded.settings = file.settings;
  if (!cli.model.empty()) {
    // The file carries its graph; --model must name the same network.
    ModelWithWeights any = LoadAnyModel(cli.model);
    const LoadedModel& model = any.model;
    const bool same = model.graph.nodes.size() == loaded.graph.nodes.size() &&
                      std::equal(model.graph.nodes.begin(), model.graph.nodes.end(),
                                 loaded.graph.nodes.begin(), [](const Node& a, const Node& b) {
                                   return a.name == b.name && a.op == b.op && a.inputs == b.inputs;
                                 });
    if (!same) {
      throw Error("--schedule " + cli.schedule + " schedules another network than --model " +
                  cli.model);
    }
    loaded.model_name = model.name;
    loaded.file_weights = std::move(any.weights);
    loaded.input_channels_last = any.input_channels_last;
    loaded.outputs = std::move(any.outputs);
  }
  loaded.schedule.name = cli.schedule;
  for (auto& block : file.blocks) {
    for (Stage& stage : block) loaded.schedule.stages.push_back(std::move(stage));
  }
  return loaded;
}

std::string ShapeText(int batch, const Shape& s) {
  return std::to_string(batch) + "x" + std::to_string(s.c) + "x" + std::to_string(s.h) + "x" +
         std::to_string(s.w);
}

double MiB(int64_t bytes) { return static_cast<double>(bytes) / (1 << 20); }

std::string ModelPeakNote(const Loaded& loaded, int64_t live, int64_t model_peak) {
  std::string note =
      model_peak == live ? "equals live at peak" : "merge stages: the plan stacks their members";
  return note + run::MemoryOrderNote(loaded.memory_order);
}

nlohmann::json TimingJson(const run::Timing& t) {
  return {{"min", t.min_ms},
          {"median", t.protocol.median_ms},
          {"max", t.max_ms},
          {"spread", t.protocol.spread_ms},
          {"runs", t.repeats}};
}

// --check on a device whose kind names another to compare with (a GPU: the
// cpu backend, other libraries and algorithms): the same network, weights and
// input there, when this build has it, within kCrossDeviceTolerance; TF32
// rounds inputs to 10 bits of mantissa, so it is not held to that.
void CheckAgainstOtherDevice(const std::string& other, const CliOptions& cli, const Graph& graph,
                             const exec::WeightStore& weights, const std::vector<float>& input,
                             const run::Execution& execution, nlohmann::json& check, bool& passed) {
  if (cli.device.find("math=tf32") != std::string::npos) {
    check["against_" + other] = "skipped: math=tf32 is not held to FP32 results";
    return;
  }
  std::unique_ptr<exec::Device> other_device;
  try {
    other_device = devices::LinkedRegistry().OpenDevice(other);
  } catch (const Error& e) {
    check["against_" + other] = std::string("skipped: ") + e.what();
    return;
  }
  const run::Execution there =
      run::Execute(*other_device, graph, run::SequentialNetworkSchedule(graph), weights, cli.batch,
                   input, nullptr);
  const run::Comparison c = run::Compare(execution.output, there.output);
  passed = passed && c.Within(kCrossDeviceTolerance);
  check["against_" + other] = {{"tolerance", kCrossDeviceTolerance},
                               {"max_abs_diff", c.max_abs_diff},
                               {"max_abs_reference", c.max_abs_reference},
                               {"passed", c.Within(kCrossDeviceTolerance)}};
}

// A multi-device schedule file: run/multi_device_cli.h does the rest.
int RunMulti(const CliOptions& cli, const Loaded& loaded, const exec::WeightStore& weights,
             const std::vector<float>& input, const std::optional<std::vector<float>>& expected,
             const MeasureSettings& timing) {
  if (cli.device_given || cli.cuda_graph) {
    throw Error(std::string(cli.cuda_graph ? "--cuda-graph" : "--device") +
                ": a multi-device schedule runs on --devices (default: the file's)");
  }
  run::MultiCliOptions multi;
  multi.schedule_path = cli.schedule;
  multi.model_name = loaded.model_name;
  multi.devices = cli.devices;
  multi.batch = cli.batch;
  multi.timing = timing;
  multi.transfer_timeout = std::chrono::seconds(cli.transfer_timeout_s);
  multi.check = cli.check;
  multi.check_tolerance = kCheckTolerance;
  multi.json = cli.format == "json";
  multi.expected = expected ? &*expected : nullptr;
  multi.expect_file = cli.expect_file;
  multi.expect_tolerance = kExpectTolerance;
  return run::RunMultiDeviceCli(multi, *loaded.multi, weights, input);
}

int Run(const CliOptions& cli) {
  const Loaded loaded = LoadInputs(cli);
  // --check compares with the model as given: the original graph and
  // weights when rewritten (the rewritten graph's are derived from them).
  const Graph& given = loaded.original ? *loaded.original : loaded.graph;
  const exec::WeightStore given_weights =
      !cli.weights_file.empty() ? exec::WeightStore::Load(given, cli.weights_file)
      : loaded.file_weights     ? *loaded.file_weights
                                : exec::WeightStore::Random(given, cli.seed);
  const exec::WeightStore weights =
      loaded.rewrite
          ? memory::DeriveWeights(given, given_weights, loaded.rewrite->rewrite.rewritten)
          : given_weights;
  const Shape in = loaded.graph.node(0).output;
  const size_t input_count =
      static_cast<size_t>(cli.batch) * static_cast<size_t>(in.c) * in.h * in.w;
  std::vector<float> input;
  if (cli.input_file.empty()) {
    input = exec::SeededValues(input_count, cli.seed);
  } else if (loaded.input_channels_last) {
    const std::string shape = std::to_string(cli.batch) + "x" + std::to_string(in.h) + "x" +
                              std::to_string(in.w) + "x" + std::to_string(in.c) + " (N,H,W,C)";
    input = run::ChannelsFirst(run::ReadFloats(cli.input_file, "--input", input_count, shape), in);
  } else {
    input = run::ReadFloats(cli.input_file, "--input", input_count, ShapeText(cli.batch, in));
  }
  const Shape output_shape = loaded.graph.nodes.back().output;
  std::optional<std::vector<float>> expected;
  if (!cli.expect_file.empty()) {
    expected =
        run::ReadFloats(cli.expect_file, "--expect",
                        static_cast<size_t>(cli.batch) * static_cast<size_t>(output_shape.c) *
                            output_shape.h * output_shape.w,
                        ShapeText(cli.batch, output_shape));
  }
  MeasureSettings timing;
  timing.warmup = cli.warmup;
  timing.number = 1;
  timing.repeat = cli.runs;
  if (loaded.multi) return RunMulti(cli, loaded, weights, input, expected, timing);
  if (!cli.devices.empty()) {
    throw Error(
        "--devices needs a multi-device schedule file (ios-farm-multi/v1) as --schedule, "
        "not " +
        cli.schedule);
  }
  const devices::BackendKind& kind = devices::LinkedRegistry().Get(cli.device);
  const run::RunModes modes =
      run::ChooseRunModes(kind.replays_graphs, cli.streams, cli.cuda_graph, cli.device);
  std::unique_ptr<exec::Device> device = kind.open_device(cli.device, {});
  const bool text = cli.format == "text";
  if (text) {
    std::printf("ios-run: %s on %s, batch %d, schedule %s (%zu stages)\n",
                loaded.model_name.c_str(), device->Info().name.c_str(), cli.batch,
                loaded.schedule.name.c_str(), loaded.schedule.stages.size());
    if (loaded.rewrite) {
      for (const std::string& line : run::RewriteLines(*loaded.rewrite)) {
        std::printf("%s\n", line.c_str());
      }
    }
    std::fflush(stdout);
  }
  const run::Execution execution = run::Execute(*device, loaded.graph, loaded.schedule, weights,
                                                cli.batch, input, modes, timing);
  const run::Prediction prediction =
      cli.predict ? run::Predict({loaded.graph, loaded.schedule.stages, cli.db, cli.device,
                                  cli.batch, loaded.settings})
                  : run::Prediction{};
  const int64_t model_peak = run::ModelPeak(loaded.graph, loaded.schedule.stages, cli.batch);

  nlohmann::json check = nullptr;
  bool check_passed = true;
  std::optional<run::Execution> baseline_run;
  const auto sequential_output = [&]() -> const std::vector<float>& {
    if (!baseline_run) {
      baseline_run = run::Execute(*device, given, run::SequentialNetworkSchedule(given),
                                  given_weights, cli.batch, input, nullptr);
    }
    return baseline_run->output;
  };
  nlohmann::json expect = nullptr;
  if (expected) {
    const run::Comparison scheduled = run::Compare(execution.output, *expected);
    const run::Comparison sequential = run::Compare(sequential_output(), *expected);
    const bool passed = scheduled.Within(kExpectTolerance) && sequential.Within(kExpectTolerance);
    check_passed = check_passed && passed;
    expect = {{"file", cli.expect_file},
              {"tolerance", kExpectTolerance},
              {"schedule_max_abs_diff", scheduled.max_abs_diff},
              {"sequential_max_abs_diff", sequential.max_abs_diff},
              {"max_abs_reference", scheduled.max_abs_reference},
              {"passed", passed}};
  }
  if (cli.check) {
    const run::NetworkSchedule sequential = run::SequentialNetworkSchedule(given);
    sequential_output();
    const run::Execution& baseline = *baseline_run;
    const run::Comparison vs_sequential = run::Compare(execution.output, baseline.output);
    check_passed = vs_sequential.Within(kCheckTolerance);
    check = {{"tolerance", kCheckTolerance},
             {"against_sequential",
              {{"max_abs_diff", vs_sequential.max_abs_diff},
               {"max_abs_reference", vs_sequential.max_abs_reference},
               {"passed", vs_sequential.Within(kCheckTolerance)}}}};
    if (loaded.rewrite) check["sequential_is"] = "the original graph, before --rewrite";
    if (run::SmallEnoughForReference(given, cli.batch)) {
      std::unique_ptr<exec::Device> reference = exec::MakeReferenceDevice();
      const run::Execution naive =
          run::Execute(*reference, given, sequential, given_weights, cli.batch, input, nullptr);
      const run::Comparison a = run::Compare(execution.output, naive.output);
      const run::Comparison b = run::Compare(baseline.output, naive.output);
      check_passed = check_passed && a.Within(kCheckTolerance) && b.Within(kCheckTolerance);
      check["against_reference"] = {
          {"schedule_max_abs_diff", a.max_abs_diff},
          {"sequential_max_abs_diff", b.max_abs_diff},
          {"max_abs_reference", a.max_abs_reference},
          {"passed", a.Within(kCheckTolerance) && b.Within(kCheckTolerance)}};
    } else {
      check["against_reference"] = "skipped: too large for the naive reference device";
    }
    if (execution.replay) {
      // The replayed graph computes what the streams computed.
      const run::Comparison replayed = run::Compare(execution.replay_output, execution.output);
      check_passed = check_passed && replayed.Within(kCheckTolerance);
      check["replay_against_streams"] = {{"max_abs_diff", replayed.max_abs_diff},
                                         {"passed", replayed.Within(kCheckTolerance)}};
    }
    if (!kind.cross_check_on.empty()) {
      CheckAgainstOtherDevice(kind.cross_check_on, cli, given, given_weights, input, execution,
                              check, check_passed);
    }
    check["passed"] = check_passed;
  }

  // The figure of how the network ran: the replayed graph where it was
  // recorded (the default on cuda), else the streamed runs.
  const run::Timing& t = modes.graph ? *execution.replay : execution.timing;
  const char* how = modes.graph ? "graph" : "streams";
  if (!cli.report.empty()) {
    run::WriteReportFile(
        cli.report,
        run::ReportOfRun({loaded.graph, loaded.model_name, loaded.schedule, device->Info(),
                          cli.batch, cli.predict ? &prediction : nullptr, t, how,
                          execution.memory.peak_live_bytes * cli.batch}));
  }
  if (text) {
    std::printf(
        "measured end to end: median %.3f ms (min %.3f, max %.3f, spread %.3f; %d runs)%s\n",
        t.protocol.median_ms, t.min_ms, t.max_ms, t.protocol.spread_ms, t.repeats,
        modes.graph ? " as one replayed CUDA graph" : "");
    if (modes.graph && modes.streams) {
      const run::Timing& r = execution.timing;
      std::printf(
          "streamed runs:       median %.3f ms (min %.3f, max %.3f, spread %.3f; %d runs)\n",
          r.protocol.median_ms, r.min_ms, r.max_ms, r.protocol.spread_ms, r.repeats);
    }
    if (cli.predict) {
      std::printf(
          "DP prediction:       %.3f ms%s (sum of the stages' latencies in %s: %lld "
          "measured now, %lld reused, %lld failed)\n",
          prediction.latency_ms, prediction.simulated ? " (simulated)" : "", cli.db.c_str(),
          static_cast<long long>(prediction.measured), static_cast<long long>(prediction.reused),
          static_cast<long long>(prediction.failed));
      if (prediction.search_run) {
        std::printf("search's end-to-end figure: %s\n",
                    run::SearchRunText(*prediction.search_run).c_str());
      }
    }
    std::printf(
        "activation memory:   %.2f MiB allocated, %.2f MiB live at peak (%d buffers in %d "
        "slots, %d concatenations as views)\n",
        MiB(execution.memory.allocated_bytes * cli.batch),
        MiB(execution.memory.peak_live_bytes * cli.batch), execution.memory.buffers,
        execution.memory.slots, execution.memory.concat_views);
    std::printf(
        "memory model:        %.2f MiB model peak (%s)\n", MiB(model_peak),
        ModelPeakNote(loaded, execution.memory.peak_live_bytes * cli.batch, model_peak).c_str());
    if (loaded.rewrite) {
      std::printf("rewritten:           %s\n",
                  run::RewritePeakLine(*loaded.rewrite, model_peak,
                                       execution.memory.peak_live_bytes * cli.batch)
                      .c_str());
    }
    const bool several_outputs = loaded.outputs.size() > 1 ||
                                 (loaded.outputs.size() == 1 && loaded.outputs[0].channels_last);
    if (several_outputs) {
      std::printf(
          "outputs:             %zu, each sample's values in turn (--expect: the same): %s\n",
          loaded.outputs.size(), run::OutputsText(loaded.outputs).c_str());
    }
    if (expected) {
      std::printf(
          "expect: %s (max |difference| %.3g scheduled, %.3g sequential; largest "
          "|reference| %.3g; tolerance %.0e of it)\n",
          expect["passed"].get<bool>() ? "PASSED" : "FAILED",
          expect["schedule_max_abs_diff"].get<double>(),
          expect["sequential_max_abs_diff"].get<double>(),
          expect["max_abs_reference"].get<double>(), kExpectTolerance);
    }
    if (!cli.report.empty()) std::printf("report written to %s\n", cli.report.c_str());
    if (cli.check) {
      std::printf("check: %s\n%s\n", check_passed ? "PASSED" : "FAILED", check.dump(2).c_str());
    }
  } else {
    nlohmann::json out = {
        {"model", loaded.model_name},
        {"schedule", loaded.schedule.name},
        {"device", device->Info().name},
        {"fingerprint", device->Info().fingerprint},
        {"batch", cli.batch},
        {"stages", execution.stages},
        {"execution", how},
        {"measured_ms", TimingJson(t)},
        {"streams_ms", modes.streams ? TimingJson(execution.timing) : nlohmann::json(nullptr)},
        {"replay_ms", execution.replay ? TimingJson(*execution.replay) : nlohmann::json(nullptr)},
        {"predicted_ms", cli.predict && std::isfinite(prediction.latency_ms)
                             ? nlohmann::json(prediction.latency_ms)
                             : nlohmann::json(nullptr)},
        {"stages_measured_for_prediction", prediction.measured},
        {"search_end_to_end", run::SearchRunJson(prediction.search_run)},
        {"peak_activation_bytes", execution.memory.allocated_bytes * cli.batch},
        {"peak_live_activation_bytes", execution.memory.peak_live_bytes * cli.batch},
        {"model_peak_activation_bytes", model_peak},
        {"memory_order", run::MemoryOrderJson(loaded.memory_order)},
        {"rewrite", loaded.rewrite ? run::RewriteJson(*loaded.rewrite) : nlohmann::json(nullptr)},
        {"check", check},
        {"expect", expect},
        {"outputs", run::OutputsJson(loaded.outputs)},
        {"report", cli.report.empty() ? nlohmann::json(nullptr) : nlohmann::json(cli.report)}};
    std::printf("%s\n", out.dump(2).c_str());
  }
  return check_passed ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  CliOptions cli;
  CLI::App app{
      "ios-run: run a whole network under a schedule on a real device; report its measured "
      "end-to-end latency beside the DP's prediction from the profiling DB, its activation "
      "memory (allocated: the arena of first-fit slots; live at peak: the most bytes live in "
      "one stage; model peak: the same from the memory model the memory order minimises, equal "
      "to live at peak without merge stages), and (--check) whether its output equals "
      "sequential execution"};
  app.add_option("--model,-m", cli.model,
                 "zoo name, IOS JSON graph file or ONNX file (*.onnx, with its weights when it "
                 "carries them); optional with a schedule file, which carries its graph; a zoo "
                 "name that is also a file here is refused: write ./NAME or zoo:NAME");
  app.add_option("--schedule", cli.schedule,
                 "sequential, greedy, memory (the order of least peak activation memory, "
                 "memory/network_order.h; no latencies needed), or a schedule file "
                 "(ios-coordinator --out, or an IOS "
                 "reference schedule); a multi-device schedule file (\"format\": "
                 "\"ios-farm-multi/v1\", docs/run.md) runs on several devices at once, one "
                 "thread each, with copies between them")
      ->default_val(cli.schedule);
  app.add_option("--rewrite", cli.rewrite,
                 "memory: first rewrite the model by identity graph rewriting (a concatenation "
                 "read by convolutions into partial convolutions, docs/memory.md) where the "
                 "least-peak order's part peaks drop, then run the rewritten network with weights "
                 "derived from the model's; --check compares with the original network run "
                 "sequentially. With --schedule sequential, greedy or memory only")
      ->default_val(cli.rewrite)
      ->check(CLI::IsMember({"none", "memory"}));
  app.add_option("--devices", cli.devices,
                 "with a multi-device schedule: its devices instead of the file's, ';'-separated "
                 "(a name may hold ','), or BASExN for N of them: cpuxN splits this process's "
                 "cores into N cpu devices (cpux2: cpu,threads=1,cpus=0;cpu,threads=1,cpus=1). "
                 "cpu and reference devices only for now");
  app.add_option("--transfer-timeout", cli.transfer_timeout_s,
                 "multi-device runs: seconds a device waits for a tensor from another before the "
                 "run fails naming the copy")
      ->default_val(cli.transfer_timeout_s)
      ->check(CLI::Range(1, 86400));
  CLI::Option* device_option =
      app.add_option("--device", cli.device,
                     "the device to run on, one of: " + devices::LinkedRegistry().Grammars() +
                         " (sim models latencies only and cannot run a network; reference: naive "
                         "loops, slow; cuda: docs/gpu.md)")
          ->default_val(cli.device);
  app.add_flag("--streams", cli.streams,
               "cuda: time the schedule as streamed runs (a CUDA stream per lane, events at "
               "forks and joins) instead of as one replayed CUDA graph, cuda's default; with "
               "--cuda-graph, time both (streams first). Other devices always run streamed");
  app.add_flag("--cuda-graph", cli.cuda_graph,
               "cuda: run the schedule as one CUDA graph, recorded once after a streamed run "
               "and replayed: the default on cuda, so alone it changes nothing; with --streams, "
               "time the graph too. Refused on a device without CUDA graphs");
  app.add_option("--batch,-b", cli.batch, "batch size")->default_val(1)->check(CLI::Range(1, 4096));
  app.add_option("--runs", cli.runs, "timed whole-network runs (median, min, max over them)")
      ->default_val(cli.runs)
      ->check(CLI::Range(1, 100000));
  app.add_option("--warmup", cli.warmup, "untimed runs first")
      ->default_val(cli.warmup)
      ->check(CLI::Range(0, 100000));
  app.add_flag("--check", cli.check,
               "compare the output with sequential execution (and, on small graphs, with the "
               "naive reference device) within 1e-4 of the largest |value|; on cuda also with "
               "the cpu backend within 1e-3 (math=fp32) and, as a graph, the replayed "
               "output with a streamed run's; exit 1 if not");
  app.add_option("--db", cli.db,
                 "profiling DB for the prediction and the search's end-to-end figure of the "
                 "schedule, when its verification stored one (created if missing)")
      ->default_val(cli.db);
  bool no_predict = false;
  app.add_flag("--no-predict", no_predict,
               "skip the DP's prediction and the stored figure (no DB is opened)");
  app.add_option("--weights", cli.weights_file,
                 "weights file (docs/execution.md); default: seeded random weights");
  app.add_option("--input", cli.input_file,
                 "the network's input: raw little-endian float32, N*C*H*W values (e.g. "
                 "scripts/export-torchvision.py's MODEL.in.bin; N*H*W*C for an ONNX model whose "
                 "input is N,H,W,C); default: seeded random values");
  app.add_option("--expect", cli.expect_file,
                 "a reference output (raw float32, as MODEL.out.bin; an ONNX model's several "
                 "outputs one after another, each in the file's own order): the scheduled and "
                 "the sequential outputs must match it within 1e-3 of its largest |value|; exit "
                 "1 if not");
  app.add_option("--report", cli.report,
                 "also write an HTML report of the run here: the schedule's lanes over time "
                 "priced from the DB, the graph by stage, measured against predicted "
                 "(docs/report.md)");
  app.add_option("--seed", cli.seed, "seed of the random weights and input")->default_val(cli.seed);
  app.add_option("--format", cli.format, "text or json")
      ->default_val(cli.format)
      ->check(CLI::IsMember({"text", "json"}));
  app.set_version_flag("--version", std::string("ios-run ") + IOS_FARM_VERSION);
  // stdout carries the report (--format json: one JSON object) alone.
  spdlog::set_default_logger(spdlog::stderr_color_mt("ios-run"));
  spdlog::set_level(spdlog::level::warn);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }
  cli.predict = !no_predict;
  cli.device_given = device_option->count() > 0;
  if (devices::LinkedRegistry().Find(cli.device) == nullptr) {
    // A name no backend answers to is a bad command line, like an unknown
    // option; one it answers to is checked (and opened) by Run.
    std::fprintf(stderr, "ios-run: --device: unknown device '%s'; valid: %s\n", cli.device.c_str(),
                 devices::LinkedRegistry().Grammars().c_str());
    return 2;
  }
  // Before any work. A multi-device file holds no stage times to draw; the
  // search that wrote it has them.
  const std::string report_problem =
      cli.report.empty() ? ""
      : coordinator::IsMultiScheduleFile(cli.schedule)
          ? "a multi-device schedule is reported by its search (ios-coordinator --devices ... "
            "--report FILE), not by ios-run yet"
          : coordinator::ReportPathProblem(cli.report);
  if (!report_problem.empty()) {
    std::fprintf(stderr, "ios-run: --report %s: %s\n", cli.report.c_str(), report_problem.c_str());
    return 2;
  }
  try {
    return Run(cli);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ios-run: %s\n", e.what());
    return 1;
  }
}
