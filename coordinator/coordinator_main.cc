// ios-coordinator: finds a fast inter-operator schedule for a network.
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "common/blocks.h"
#include "common/error.h"
#include "common/ios_json.h"
#include "common/model_source.h"
#include "common/printable.h"
#include "common/zoo.h"
#include "coordinator/cli_progress.h"
#include "coordinator/farm.h"
#include "coordinator/report.h"
#include "coordinator/schedule_json.h"
#include "coordinator/search.h"
#include "coordinator/worker_process.h"
#include "db/profile_store.h"
#include "devices/registry.h"
#include "net/endpoint.h"
#include "onnx/model_loader.h"
#include "onnx/onnx_import.h"

namespace {

using namespace ios;
using namespace ios::coordinator;

struct CliOptions {
  std::string model;
  std::string evaluate;
  bool list_models = false;
  std::string device = "cpu";
  std::string strategy = "both";
  std::string measure = "lazy";
  std::string blocks = "model";  // or "auto": found here, the model's ignored
  bool no_pruning = false;
  std::string db = "ios-farm.db";
  std::string out;
  bool baselines = true;
  bool quiet = false;
  std::string log_level = "info";
  int local_workers = -1;       // -1: 1 without --bind, 0 with it
  bool worker_process = false;  // --worker-process (implied by cuda without --bind)
  int wait_workers_s = 60, heartbeat_ms = 1000, query_timeout_s = 120;
  bool bind_given = false;                      // --bind on the command line, even as ''
  std::vector<std::string> unused_by_evaluate;  // given options --evaluate ignores
  SearchOptions search;
  FarmOptions farm;
};

// Whether the search measures through a child ios-worker: when asked, and
// for cuda without --bind (this process does not link CUDA).
bool UsesWorkerProcess(const CliOptions& cli) {
  return cli.worker_process ||
         (devices::BuiltinRegistry().NeedsOwnProcess(cli.device) && cli.farm.bind.empty());
}

int LocalWorkers(const CliOptions& cli) {
  if (cli.local_workers >= 0) return cli.local_workers;
  return cli.farm.bind.empty() && !UsesWorkerProcess(cli) ? 1 : 0;
}

// What is wrong with --device or --bind, before anything is opened or
// started; empty when nothing is.
std::string FarmOptionProblem(const CliOptions& cli) {
  if (cli.bind_given && cli.farm.bind.empty()) {
    return "--bind is empty; give an endpoint, e.g. --bind tcp://*:5555, or leave it out";
  }
  if (!cli.farm.bind.empty()) {
    const std::string problem = net::EndpointProblem(cli.farm.bind, net::EndpointUse::kBind);
    if (!problem.empty()) return "--bind '" + cli.farm.bind + "': " + problem;
  }
  if (cli.device.empty()) return "--device is empty; give a device, e.g. --device cpu";
  if (UsesWorkerProcess(cli)) {
    // Open the device in a short-lived child first: a worker that cannot
    // would otherwise fail out of sight while the search waits for it.
    const std::string worker = FindWorkerBinary();
    if (worker.empty()) {
      return "--device '" + cli.device +
             "': measuring through an ios-worker process needs ios-worker beside "
             "ios-coordinator (or in the build tree's worker/); build it, or start one yourself "
             "and give --bind (docs/gpu.md)";
    }
    if (const std::string problem = CheckDeviceInWorker(worker, cli.device); !problem.empty()) {
      return "--device '" + cli.device + "': the local ios-worker cannot measure on it: " + problem;
    }
  }
  if (LocalWorkers(cli) > 0) {
    // The embedded workers measure on --device: it must be a backend here.
    // (With remote workers only, it selects them by name and may be anything.)
    try {
      devices::BuiltinRegistry().OpenBackend(cli.device);
    } catch (const Error& e) {
      return "--device '" + cli.device + "': " + e.what();
    }
  }
  return {};
}

// The farm of a search, and the ios-worker child it measures through, if
// any (stopped after the farm has said goodbye).
class RunningFarm {
 public:
  RunningFarm(std::unique_ptr<SupervisedWorker> process, std::unique_ptr<Farm> farm)
      : process_(std::move(process)), farm_(std::move(farm)) {}
  Farm& operator*() const { return *farm_; }
  Farm* operator->() const { return farm_.get(); }

 private:
  std::unique_ptr<SupervisedWorker> process_;
  std::unique_ptr<Farm> farm_;  // after process_: goes first
};

RunningFarm StartFarm(const CliOptions& cli) {
  FarmOptions options = cli.farm;
  options.device = cli.device;
  options.local_backend = cli.device;
  options.local_workers = LocalWorkers(cli);
  options.wait_for_workers = std::chrono::seconds(cli.wait_workers_s);
  options.heartbeat = std::chrono::milliseconds(cli.heartbeat_ms);
  options.query_timeout = std::chrono::seconds(cli.query_timeout_s);
  if (!UsesWorkerProcess(cli)) return {nullptr, Farm::Start(options)};
  // FarmOptionProblem found the worker and checked the device.
  const std::string worker = FindWorkerBinary();
  if (options.bind.empty()) options.bind = "tcp://127.0.0.1:*";
  options.min_workers = std::max(options.min_workers, 1);
  std::unique_ptr<Farm> farm = Farm::Start(options);
  std::vector<std::string> args{"--backend",
                                cli.device,
                                "--connect",
                                LoopbackTo(farm->BoundEndpoint()),
                                "--id",
                                "local",
                                "--log-level",
                                "warn",
                                "--exit-with-parent"};
  if (!cli.farm.curve_secret_key_file.empty()) {
    throw Error(
        "--worker-process does not carry CURVE keys to its child; start the worker "
        "yourself with --curve-key and --curve-server-key");
  }
  if (cli.farm.local_backend_options.sim_delay_ms > 0) {
    args.push_back("--sim-delay-ms");
    args.push_back(std::to_string(cli.farm.local_backend_options.sim_delay_ms));
  }
  auto process = std::make_unique<SupervisedWorker>(worker, args);
  spdlog::info("measuring through ios-worker process {} ({})", process->pid(), worker);
  return {std::move(process), std::move(farm)};
}

// A zoo name, or else a path to an IOS JSON or ONNX file. The search needs
// only the graph: an ONNX file's weights change no latency.
std::pair<Graph, std::string> ResolveModel(const std::string& model) {
  const auto start = std::chrono::steady_clock::now();
  ModelWithWeights loaded = LoadAnyModel(model);
  for (const std::string& warning : loaded.warnings) spdlog::warn("{}", warning);
  if (onnx_import::IsOnnxPath(model)) {
    const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
    spdlog::info("{}: imported in {:.3f} s ({} operators, {} rewrites)", model, took.count(),
                 loaded.model.graph.OperatorCount(), loaded.notes.size());
  }
  return {std::move(loaded.model.graph), std::move(loaded.model.name)};
}

std::string NowUtc() {
  const std::time_t t = std::time(nullptr);
  char buffer[32];
  std::strftime(buffer, sizeof buffer, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buffer;
}

// Why the schedule could not be written to `path`, or "" when it can. Run
// before any work so that a typo costs nothing; leaves no file behind.
std::string OutputProblem(const std::string& path) {
  if (path == "-") return "";
  std::error_code error;
  if (std::filesystem::is_directory(path, error)) return "it is a directory";
  const bool existed = std::filesystem::exists(path, error);
  std::FILE* file = std::fopen(path.c_str(), "a");  // appends nothing, truncates nothing
  if (file == nullptr) return std::strerror(errno);
  std::fclose(file);
  if (!existed) std::filesystem::remove(path, error);
  return "";
}

void WriteOutput(const std::string& path, const std::string& text) {
  if (path == "-") {
    std::cout << text;
    return;
  }
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  if (!out) throw Error(path + ": cannot write the schedule file");
}

std::string DescribeSchedule(const Graph& graph, const Schedule& schedule) {
  std::string text;
  for (size_t b = 0; b < schedule.blocks.size(); ++b) {
    text += "block " + std::to_string(b) + ":\n";
    for (const ScheduledStage& s : schedule.blocks[b]) {
      std::string groups;
      for (const auto& g : s.stage.groups) {
        groups += groups.empty() ? "[" : " | [";
        for (size_t i = 0; i < g.size(); ++i) {
          groups += (i ? " " : "") + Printable(graph.node(g[i]).name);
        }
        groups += "]";
      }
      char line[64];
      std::snprintf(line, sizeof line, "  %9.4f ms  %-8s ", s.latency_ms,
                    ToString(s.stage.strategy));
      text += line + groups + "\n";
    }
  }
  return text;
}

// The first line of every run: which device the latencies come from, so a
// simulated figure is never taken for a measurement. On stderr when stdout
// carries the schedule (--out -).
void AnnounceDevice(const CliOptions& cli, Measurer& farm, const std::string& what) {
  const DeviceInfo& device = farm.Device();
  std::fprintf(cli.out == "-" ? stderr : stdout, "ios-coordinator: %s on %s, batch %d, %s (%s)\n",
               what.c_str(), device.name.c_str(), cli.search.batch_size,
               device.simulated ? "SIMULATED latencies (an analytical model, not a measurement)"
                                : "measured latencies",
               cli.search.settings.Key().c_str());
  std::fflush(cli.out == "-" ? stderr : stdout);
}

int Search(const CliOptions& cli) {
  const std::string started_at = NowUtc();
  auto [graph, model_name] = ResolveModel(cli.model);
  if (cli.blocks == "auto") {
    SetAutomaticBlocks(graph);
    InferShapes(graph);
  }
  auto store = db::ProfileStore::Open(cli.db);
  SayWhatIsKeptOnInterrupt(cli.db);
  auto farm = StartFarm(cli);
  AnnounceDevice(cli, *farm, "searching " + model_name);
  ProgressPrinter progress(cli.quiet);
  // A long DP walk (the library calls at most once a second).
  auto plan_progress = [&cli](const PlanProgress& p) {
    if (cli.quiet) return;
    std::fprintf(stderr,
                 "enumerate: block %d part %d (%d operators): %lld states, %lld transitions, "
                 "%lld stages so far, %.0f s\n",
                 p.block, p.part, p.dp.operators, static_cast<long long>(p.dp.states),
                 static_cast<long long>(p.dp.transitions), static_cast<long long>(p.dp.stages),
                 p.dp.elapsed_s);
  };
  SearchOutcome outcome =
      RunSearch(graph, model_name, cli.search, *store, *farm, std::ref(progress), plan_progress);
  ScheduleInfo info{model_name, outcome.device, cli.search.batch_size, cli.search, {}, {}};
  if (cli.baselines) {
    info.sequential_ms = outcome.sequential.latency_ms;
    info.greedy_ms = outcome.greedy.latency_ms;
  }
  const std::string schedule_json = ScheduleToJson(graph, outcome.ios, info);
  db::SearchRecord record;
  record.model = model_name;
  record.device_fingerprint = outcome.device.fingerprint;
  record.batch_size = cli.search.batch_size;
  record.settings_json = "{\"strategy\":\"" + cli.strategy +
                         "\",\"r\":" + std::to_string(cli.search.dp.max_group_size) +
                         ",\"s\":" + std::to_string(cli.search.dp.max_groups) + ",\"settings\":\"" +
                         cli.search.settings.Key() + "\",\"measure\":\"" + cli.measure + "\"";
  if (outcome.table.stats.lazy) {
    // What the lazy search's bounds were worth (docs/search-cost.md).
    record.settings_json +=
        ",\"bound_violations\":" + std::to_string(outcome.table.stats.bound_violations) +
        ",\"parts_measured_in_full\":" + std::to_string(outcome.table.stats.parts_measured_in_full);
  }
  record.settings_json += "}";
  // Compact in the DB: a NASNet schedule with its graph is 255 KB so, 792 KB indented.
  record.schedule_json = ScheduleToJson(graph, outcome.ios, info, JsonLayout::kCompact);
  record.latency_ms = outcome.ios.latency_ms;
  record.stages_measured = outcome.table.stats.measured;
  record.stages_reused = outcome.table.stats.reused;
  record.enumerate_s = outcome.enumerate_s;
  record.measure_s = outcome.measure_s;
  record.solve_s = outcome.solve_s;
  record.started_at = started_at;
  if (!cli.out.empty()) WriteOutput(cli.out, schedule_json);  // fails before anything is recorded
  store->RecordSearch(record);
  if (cli.out != "-") {
    std::cout << "IOS schedule" << (outcome.device.simulated ? " (simulated latencies)" : "")
              << ":\n"
              << DescribeSchedule(graph, outcome.ios) << "\n";
    if (!cli.baselines) {
      outcome.sequential.latency_ms = NAN;
      outcome.greedy.latency_ms = NAN;
    }
    std::cout << FormatReport(graph, outcome);
    if (!cli.out.empty()) std::cout << "schedule written to " << cli.out << "\n";
    std::cout.flush();
    std::cout << FormatWorkers(farm->Workers());
  }
  return 0;
}

int Evaluate(const CliOptions& cli) {
  LoadedSchedule loaded;
  try {
    loaded = LoadSchedule(cli.evaluate);
  } catch (const Error& e) {
    // The loader's message starts with the file; say which option gave it.
    throw Error("--evaluate " + std::string(e.what()));
  }
  auto store = db::ProfileStore::Open(cli.db);
  SayWhatIsKeptOnInterrupt(cli.db);
  auto farm = StartFarm(cli);
  AnnounceDevice(cli, *farm, "pricing " + cli.evaluate);
  SearchPlan plan;
  StageKeyer keyer(loaded.graph);
  std::vector<BlockSchedule> blocks;
  for (const auto& stages : loaded.blocks) {
    BlockSchedule block;
    for (const Stage& s : stages) block.emplace_back(s, plan.Intern(keyer, s));
    blocks.push_back(std::move(block));
  }
  ProgressPrinter progress(cli.quiet);
  LatencyTable table =
      MeasureStages(loaded.graph, plan, *store, *farm, cli.search, std::ref(progress));
  const Schedule priced = PriceSchedule(blocks, table.latency_ms);
  const DeviceInfo& device = farm->Device();
  std::printf("schedule %s (%s format, %zu distinct stages)\n", cli.evaluate.c_str(),
              loaded.origin.c_str(), plan.stage_count());
  std::printf("device %s%s, batch %d: %.3f ms%s\n", device.name.c_str(),
              device.simulated ? " (SIMULATED)" : "", cli.search.batch_size, priced.latency_ms,
              device.simulated ? " (simulated)" : "");
  std::printf("stages measured %lld, reused from DB %lld, failed %lld\n",
              static_cast<long long>(table.stats.measured),
              static_cast<long long>(table.stats.reused),
              static_cast<long long>(table.stats.failed));
  return std::isfinite(priced.latency_ms) ? 0 : 2;
}

}  // namespace

int main(int argc, char** argv) {
  CliOptions cli;
  CLI::App app{
      "ios-coordinator: searches for a fast inter-operator schedule of a CNN (the IOS dynamic "
      "program), measuring candidate stages on a backend and memoizing them in an SQLite "
      "profiling DB."};
  app.add_option("--model,-m", cli.model,
                 "zoo model name (see --list-models), IOS JSON file or ONNX file (*.onnx); a "
                 "zoo name that is also a file here is refused: write ./NAME or zoo:NAME");
  app.add_flag("--list-models", cli.list_models, "print the built-in models and exit");
  // No CLI11 ExistingFile check: the loader refuses a missing file, a
  // directory, a FIFO or a huge file with its own message (exit 1).
  app.add_option("--evaluate", cli.evaluate,
                 "price a schedule file (ios-farm --out file or IOS reference schedule) at "
                 "--batch on --device, measuring only stages the DB lacks; the search options "
                 "(--model, --out, --strategy, -r, -s, --no-pruning, the DP budgets, "
                 "--no-baselines, --measure, --bound-margin, --sub-stage-bounds) do not apply to "
                 "it and are refused");
  app.add_option("--batch,-b", cli.search.batch_size, "batch size")
      ->default_val(1)
      ->check(CLI::Range(1, 1 << 20));
  app.add_option(
         "--device", cli.device,
         "device to measure on (" + devices::BuiltinRegistry().Grammars() +
             "): the embedded workers' backend (cpu: this machine's CPU through oneDNN; sim: "
             "simulated GPUs), and which ios-worker processes may serve the search (those "
             "whose device name, backend or fingerprint it equals); cuda: NVIDIA GPUs, "
             "measured by ios-worker processes: with --bind, those you start "
             "(`ios-worker --backend cuda`); without, one this tool starts itself (docs/gpu.md)")
      ->default_val("cpu");
  app.add_option("--strategy", cli.strategy, "stage strategies the DP may use")
      ->default_val("both")
      ->check(CLI::IsMember({"both", "parallel", "merge"}));
  app.add_option("-r", cli.search.dp.max_group_size, "max operators per group (pruning r)")
      ->default_val(3)
      ->check(CLI::Range(1, DpOptions::kMaxPartSize));
  app.add_option("-s", cli.search.dp.max_groups, "max groups per stage (pruning s)")
      ->default_val(8)
      ->check(CLI::Range(1, DpOptions::kMaxPartSize));
  app.add_flag("--no-pruning", cli.no_pruning, "disable pruning (r and s unbounded)");
  app.add_option("--max-part-size", cli.search.max_part_size,
                 "blocks larger than this are split into parts")
      ->default_val(50)
      ->check(CLI::Range(1, DpOptions::kMaxPartSize));
  app.add_option("--max-dp-states", cli.search.dp.max_states,
                 "DP budget per part: states; a part over a budget is cut at a narrow cut and "
                 "its pieces solved one after another (or greedily), with a warning")
      ->default_val(DpOptions::kDefaultMaxStates)
      ->check(CLI::Range(int64_t{1}, DpOptions::kMaxBudget));
  app.add_option("--max-dp-transitions", cli.search.dp.max_transitions,
                 "DP budget per part: transitions (state, last stage)")
      ->default_val(DpOptions::kDefaultMaxTransitions)
      ->check(CLI::Range(int64_t{1}, DpOptions::kMaxBudget));
  app.add_option("--max-dp-stages", cli.search.dp.max_stages,
                 "DP budget per part: distinct candidate stages (each one is measured)")
      ->default_val(DpOptions::kDefaultMaxStages)
      ->check(CLI::Range(int64_t{1}, DpOptions::kMaxBudget));
  app.add_option("--max-search-stages", cli.search.max_search_stages,
                 "budget of the whole search: distinct candidate stages; parts beyond it are cut "
                 "or scheduled greedily like parts over --max-dp-stages")
      ->default_val(SearchOptions::kDefaultMaxSearchStages)
      ->check(CLI::Range(int64_t{1}, DpOptions::kMaxBudget));
  app.add_option("--measure", cli.measure,
                 "which candidate stages to measure: lazy (those lower bounds from the single "
                 "operators cannot rule out; the same schedule as all, docs/search-cost.md) or "
                 "all")
      ->default_val("lazy")
      ->check(CLI::IsMember({"lazy", "all"}));
  app.add_option("--blocks", cli.blocks,
                 "model: the blocks and parts the model file or zoo gives; auto: found here (cut "
                 "where every path passes, joined up to 24 operators; docs/onnx.md), as ONNX "
                 "models always get")
      ->default_val("model")
      ->check(CLI::IsMember({"model", "auto"}));
  double bound_margin_percent = 0;
  CLI::Option* bound_margin =
      app.add_option("--bound-margin", bound_margin_percent,
                     "lazy: how far below the measured single operators a stage's lower bound is "
                     "kept, in percent, against measurement noise (default 0: stored latencies "
                     "are taken as they are)")
          ->check(CLI::Range(0.0, 99.0));
  app.add_option("--bound-violations-max-fraction", cli.search.bound_violations_max_fraction,
                 "lazy: a part whose measured stages come in below their lower bounds more "
                 "often than this fraction of them is measured in full, every candidate "
                 "(0: at the first; 1: never; docs/search-cost.md)")
      ->default_val(SearchOptions::kDefaultBoundViolationsMaxFraction)
      ->check(CLI::Range(0.0, 1.0));
  app.add_flag("--sub-stage-bounds", cli.search.sub_stage_bounds,
               "lazy: also bound a stage by its sub-stages (without one of its groups); measures "
               "far fewer stages but may return a slightly slower schedule than --measure all "
               "(docs/search-cost.md)");
  app.add_option("--db", cli.db, "profiling DB file (created if missing)")->default_val(cli.db);
  app.add_option("--out,-o", cli.out,
                 "write the searched schedule JSON here ('-' for stdout); not with --evaluate");
  bool no_baselines = false;
  app.add_flag("--no-baselines", no_baselines,
               "do not report the sequential and greedy baselines (reported by default)");
  // Defaults depend on the device (DefaultMeasureSettings): filled in below.
  MeasureSettings given;
  CLI::Option* warmup =
      app.add_option("--warmup", given.warmup, "warm-up runs per measurement (default 2)")
          ->check(CLI::Range(0, 1000));
  CLI::Option* number = app.add_option("--number", given.number, "runs per repeat (default 6)")
                            ->check(CLI::Range(1, 1000));
  CLI::Option* repeat =
      app.add_option("--repeat", given.repeat,
                     "repeats: the median and spread of the means of the last REPEAT repeats are "
                     "stored (default 6)")
          ->check(CLI::Range(1, 1000));
  CLI::Option* max_repeat =
      app.add_option("--max-repeat", given.max_repeat,
                     "adaptive: up to this many repeats until the last REPEAT agree within "
                     "--max-spread (default 30 on real devices; sim: not adaptive)")
          ->check(CLI::Range(0, 1000));
  double max_spread_percent = 5;
  CLI::Option* max_spread =
      app.add_option("--max-spread", max_spread_percent,
                     "adaptive: relative spread (max - min over median, in percent) to stop at "
                     "(default 5)")
          ->check(CLI::Range(0.0, 100.0));
  app.add_flag("--quiet,-q", cli.quiet,
               "no progress lines (warnings still go to the log: --log-level)");
  app.add_option("--log-level", cli.log_level, "trace, debug, info, warn, error, off")
      ->default_val(cli.log_level)
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "off"}));
  // The farm.
  CLI::Option* bind_option =
      app.add_option("--bind", cli.farm.bind,
                     "listen for ios-worker processes here, e.g. tcp://*:5555 (default: none, "
                     "embedded workers only)");
  app.add_flag("--worker-process", cli.worker_process,
               "measure through a child ios-worker process on --device (found beside "
               "ios-coordinator) instead of in-process threads; the default for cuda without "
               "--bind, since this process does not link CUDA");
  app.add_option("--local-workers", cli.local_workers,
                 "embedded worker threads on --device over inproc:// (default 1 without --bind, "
                 "0 with it)")
      ->check(CLI::Range(0, 256));
  app.add_option("--min-workers", cli.farm.min_workers,
                 "wait for this many workers serving --device before measuring")
      ->default_val(1)
      ->check(CLI::Range(0, 4096));
  app.add_option("--wait-workers-s", cli.wait_workers_s,
                 "give up when workers do not come (or all leave) for this long")
      ->default_val(cli.wait_workers_s)
      ->check(CLI::Range(1, 86400));
  app.add_option("--heartbeat-ms", cli.heartbeat_ms,
                 "heartbeat period; a worker silent for 3 periods is lost and its queries "
                 "re-queued")
      ->default_val(cli.heartbeat_ms)
      ->check(CLI::Range(10, 600000));
  app.add_option("--query-timeout-s", cli.query_timeout_s,
                 "a query unanswered this long is sent to another worker")
      ->default_val(cli.query_timeout_s)
      ->check(CLI::Range(1, 86400));
  app.add_option("--max-attempts", cli.farm.max_attempts,
                 "attempts per query before its result is stored as a timeout error")
      ->default_val(cli.farm.max_attempts)
      ->check(CLI::Range(1, 100));
  app.add_option("--sim-delay-ms", cli.farm.local_backend_options.sim_delay_ms,
                 "sim workers started by this coordinator (embedded or --worker-process) sleep "
                 "this long per measurement (benchmarks, tests)")
      ->default_val(0.0)
      ->check(CLI::Range(0.0, 600000.0));
  app.add_option("--curve-secret-key", cli.farm.curve_secret_key_file,
                 "CURVE: this coordinator's key pair file (ios-keygen); needs --curve-allow")
      ->check(CLI::ExistingFile);
  app.add_option("--curve-allow", cli.farm.curve_allow_dir,
                 "CURVE: directory of worker public keys (*.pub) allowed to connect")
      ->check(CLI::ExistingDirectory);
  app.set_version_flag("--version", std::string("ios-coordinator ") + IOS_FARM_VERSION);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // CLI11's own codes (105, 109, ...) mean nothing to scripts: a bad
    // command line is 2, like every other usage error here.
    const int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }
  cli.bind_given = bind_option->count() > 0;
  {
    MeasureSettings& settings = cli.search.settings;
    settings = DefaultMeasureSettings(cli.device.starts_with("sim:"));
    if (warmup->count() > 0) settings.warmup = given.warmup;
    if (number->count() > 0) settings.number = given.number;
    if (repeat->count() > 0) settings.repeat = given.repeat;
    if (max_repeat->count() > 0) settings.max_repeat = given.max_repeat;
    if (max_spread->count() > 0 || max_repeat->count() > 0) {
      settings.max_relative_spread = max_spread_percent / 100;
    }
  }
  cli.search.measure = cli.measure == "all" ? MeasureMode::kAll : MeasureMode::kLazy;
  if (bound_margin->count() > 0) cli.search.bound_margin = bound_margin_percent / 100;
  // Options of the search that pricing a given schedule would silently
  // ignore: given with --evaluate, they are a mistake worth saying.
  for (const char* name :
       {"--model", "--out", "--strategy", "-r", "-s", "--no-pruning", "--max-part-size",
        "--max-dp-states", "--max-dp-transitions", "--max-dp-stages", "--max-search-stages",
        "--no-baselines", "--measure", "--blocks", "--bound-margin", "--sub-stage-bounds",
        "--bound-violations-max-fraction"}) {
    if (app.get_option(name)->count() == 0) continue;
    cli.unused_by_evaluate.push_back(name);
  }
  cli.baselines = !no_baselines;
  spdlog::set_default_logger(spdlog::stderr_color_mt("ios-coordinator"));
  spdlog::set_level(spdlog::level::from_str(cli.log_level));
  spdlog::set_pattern("%Y-%m-%d %H:%M:%S.%e [%l] %v");
  try {
    if (cli.list_models) {
      for (const ZooEntry& entry : ZooModels()) {
        std::printf("%-14s %s\n", entry.name.c_str(), entry.description.c_str());
      }
      return 0;
    }
    // Usage errors: one line, exit code 2.
    if (const std::string problem = FarmOptionProblem(cli); !problem.empty()) {
      std::fprintf(stderr, "ios-coordinator: error: %s\n", problem.c_str());
      return 2;
    }
    cli.search.dp.strategies = cli.strategy == "parallel" ? StrategySet::kParallel
                               : cli.strategy == "merge"  ? StrategySet::kMerge
                                                          : StrategySet::kBoth;
    if (cli.no_pruning) {
      cli.search.dp.max_group_size = DpOptions::kMaxPartSize;
      cli.search.dp.max_groups = DpOptions::kMaxPartSize;
    }
    if (!cli.evaluate.empty()) {
      if (!cli.unused_by_evaluate.empty()) {
        std::fprintf(stderr, "ios-coordinator: error: %s is not used with --evaluate\n",
                     cli.unused_by_evaluate.front().c_str());
        return 2;
      }
      return Evaluate(cli);
    }
    if (cli.model.empty()) {
      std::fprintf(stderr,
                   "ios-coordinator: error: --model is required (or --evaluate FILE, "
                   "--list-models); see --help\n");
      return 2;
    }
    if (!cli.out.empty()) {
      if (const std::string problem = OutputProblem(cli.out); !problem.empty()) {
        std::fprintf(stderr,
                     "ios-coordinator: error: --out %s: cannot write the schedule there: %s\n",
                     cli.out.c_str(), problem.c_str());
        return 2;
      }
    }
    return Search(cli);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ios-coordinator: error: %s\n", e.what());
    return 1;
  }
}
