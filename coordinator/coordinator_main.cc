// ios-coordinator: finds a fast inter-operator schedule for a network.
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>

#include "common/error.h"
#include "common/zoo.h"
#include "coordinator/cli.h"
#include "coordinator/memory_front.h"
#include "coordinator/report_input.h"
#include "devices/registry.h"

int main(int argc, char** argv) {
  using namespace ios;
  using namespace ios::coordinator;
  using namespace ios::coordinator::cli;
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
  std::string batch_text = "1";
  app.add_option("--batch,-b", batch_text,
                 "batch size (1 to 1048576); with --specialize a comma list, e.g. 1,16,32")
      ->default_val(batch_text);
  app.add_flag("--specialize", cli.specialize,
               "the specialization matrix (the IOS paper's Table 3, transposed): search the "
               "schedule for every --batch in the list on every --device (repeat --device to "
               "compare devices), then price each at every other (batch, device) from the DB, "
               "measuring only what is missing, and run it end to end unless --no-verify; "
               "prints the schedules optimised for (rows) against where they run (columns), "
               "normalised to each column's best");
  app.add_option("--format", cli.format,
                 "with --specialize: text (the default), csv (one row per cell) or json")
      ->check(CLI::IsMember({"text", "csv", "json"}));
  CLI::Option* device_option =
      app.add_option(
             "--device", cli.devices,
             "device to measure on (" + devices::BuiltinRegistry().Grammars() +
                 "): the embedded workers' backend (cpu: this machine's CPU through oneDNN; sim: "
                 "simulated GPUs), and which ios-worker processes may serve the search (those "
                 "whose device name, backend or fingerprint it equals); cuda: NVIDIA GPUs, "
                 "measured by ios-worker processes: with --bind, those you start "
                 "(`ios-worker --backend cuda`); without, one this tool starts itself "
                 "(docs/gpu.md); repeated only with --specialize")
          ->default_val("cpu");
  std::string devices, mapper = "lp", link;
  CLI::Option* devices_option = app.add_option(
      "--devices", devices,
      "schedule one inference over several identical devices (HIOS): BASExN (sim:v100x4, cpux2) "
      "or names separated by ';'; the IOS search on one of them runs first, as the baseline");
  app.add_option("--multi-gpu", mapper,
                 "with --devices: map operators by longest paths (lp) or mapping recording (mr)")
      ->default_val(mapper)
      ->check(CLI::IsMember({"lp", "mr"}));
  app.add_option("--window", cli.multi.hios.window.window,
                 "with --devices: stages one sliding window may merge on a device (1: none)")
      ->default_val(cli.multi.hios.window.window)
      ->check(CLI::Range(1, 64));
  app.add_option("--streams", cli.multi.hios.window.streams,
                 "with --devices: operators one merged stage may run side by side")
      ->default_val(cli.multi.hios.window.streams)
      ->check(CLI::Range(1, 64));
  app.add_flag("--force-devices", cli.force_devices,
               "with --devices: write the multi-device schedule even where one device's schedule "
               "is predicted faster (by default that one is written, on device 0)");
  CLI::Option* link_option = app.add_option(
      "--link", link,
      "with --devices: the link between devices: nvlink, pcie, host, GBPS:US, or measure "
      "(timed by a worker that owns two of the devices, embedded ones included, and kept in "
      "the profiling DB; docs/hios.md) (default: nvlink for sim, host for cpu, pcie "
      "otherwise; modelled, not measured)");
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
  app.add_option("--memory-budget", cli.memory_budget,
                 "largest peak activation memory the schedule may take at --batch, in bytes or "
                 "with K, M or G (powers of 1024): the fastest schedule under it "
                 "(docs/memory.md)");
  app.add_option("--objective", cli.objective,
                 "latency: the fastest schedule (under --memory-budget when given); memory: the "
                 "fastest of the schedules with the least peak activation memory")
      ->default_val("latency")
      ->check(CLI::IsMember({"latency", "memory"}));
  CLI::Option* front_option =
      app.add_option("--memory-front", cli.memory_front,
                     "print the latency/peak-memory trade-off instead of one schedule: the "
                     "unconstrained search, the least-peak one (--objective memory), N-2 budgets "
                     "evenly between their peaks and one at the sequential schedule's peak, all "
                     "on one profiling DB; the Pareto front is printed. --out then writes the "
                     "unconstrained schedule, or the one --memory-budget or --objective memory "
                     "asks for (docs/memory.md)")
          ->expected(0, 1)
          ->default_str(std::to_string(MemoryFrontOptions{}.points))
          ->check(CLI::Range(MemoryFrontOptions::kMinPoints, MemoryFrontOptions::kMaxPoints));
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
  app.add_option("--report", cli.report,
                 "also write an HTML report of the search, --evaluate or --specialize here: "
                 "lanes over time, the graph by stage, the schedules and parts compared, the "
                 "specialization matrix as a heat map (docs/report.md)");
  bool no_verify = false;
  app.add_flag("--no-verify", no_verify,
               "return the DP's optimum without running the best candidates end to end first "
               "(docs/execution.md); --evaluate then prices only");
  app.add_option("--verify", cli.search.verify.alternatives,
                 "DP schedules run end to end beside the optimum, greedy and sequential before "
                 "the fastest as measured is returned")
      ->default_val(cli.search.verify.alternatives)
      ->check(CLI::Range(0, VerifyOptions::kMaxAlternatives));
  app.add_option("--verify-passes", cli.search.verify.passes,
                 "times each candidate is run end to end on a real device, in alternating "
                 "order, keeping its lowest median (the simulator: once)")
      ->default_val(cli.search.verify.passes)
      ->check(CLI::Range(1, VerifyOptions::kMaxPasses));
  app.add_option("--verify-budget", cli.search.verify.budget_fraction,
                 "a pass after the first runs only while the verification stays within this "
                 "fraction of the search's time before it (0: one pass; the first always runs)")
      ->default_val(cli.search.verify.budget_fraction)
      ->check(CLI::Range(0.0, 1000.0));
  bool no_baselines = false;
  app.add_flag("--no-baselines", no_baselines,
               "do not report the sequential and greedy baselines (reported by default)");
  // Defaults depend on the device (DefaultMeasureSettings): filled in below.
  MeasureSettings given;  // CLI11 parses into it; cli.measure_given keeps what was given
  CLI::Option* warmup =
      app.add_option("--warmup", given.warmup, "warm-up runs per measurement (default 2; cuda 4)")
          ->check(CLI::Range(0, 1000));
  CLI::Option* number =
      app.add_option("--number", given.number, "runs per repeat (default 6; cuda 8)")
          ->check(CLI::Range(1, 1000));
  CLI::Option* repeat =
      app.add_option("--repeat", given.repeat,
                     "repeats: the median and spread of the means of the last REPEAT repeats are "
                     "stored (default 6; cuda 5)")
          ->check(CLI::Range(1, 1000));
  CLI::Option* max_repeat =
      app.add_option("--max-repeat", given.max_repeat,
                     "adaptive: up to this many repeats until the last REPEAT agree within "
                     "--max-spread (default 30 on cpu, 15 on cuda; sim: not adaptive)")
          ->check(CLI::Range(0, 1000));
  double max_spread_percent = 5;
  CLI::Option* max_spread =
      app.add_option("--max-spread", max_spread_percent,
                     "adaptive: relative spread (max - min over median, in percent) to stop at "
                     "(default 5; cuda 3)")
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
  cli.device = cli.devices.front();
  try {
    cli.batches = ParseBatchList(batch_text);
  } catch (const Error& e) {
    std::fprintf(stderr, "ios-coordinator: error: %s\n", e.what());
    return 2;
  }
  cli.search.batch_size = cli.batches.front();
  if (const std::string problem = SpecializeOptionProblem(cli, devices_option->count() > 0);
      !problem.empty()) {
    std::fprintf(stderr, "ios-coordinator: error: %s\n", problem.c_str());
    return 2;
  }
  if (front_option->count() > 0 && devices_option->count() > 0) {
    std::fprintf(stderr,
                 "ios-coordinator: error: --memory-front searches one device; it is not used with "
                 "--devices\n");
    return 2;
  }
  if (devices_option->count() > 0) {
    try {
      const DeviceList list = ParseDeviceList(devices, ProcessCpus());
      if (device_option->count() > 0 && cli.device != list.measure_on) {
        std::fprintf(stderr, "ios-coordinator: error: --device %s and --devices %s disagree\n",
                     cli.device.c_str(), devices.c_str());
        return 2;
      }
      cli.device = list.measure_on;
      cli.device_count = list.count();
      if (list.count() > 1 && (!cli.memory_budget.empty() || cli.objective == "memory")) {
        std::fprintf(stderr,
                     "ios-coordinator: error: --memory-budget and --objective memory schedule one "
                     "device; the multi-device mapping of --devices %s does not honour them yet\n",
                     devices.c_str());
        return 2;
      }
      cli.multi.devices = list.count();
      cli.multi.names = list.names;
      cli.multi.hios.mapper = hios::ParseMapper(mapper);
      // Core groups of one cpu copy through host memory; simulated GPUs
      // model V100s with NVLink; real GPUs are assumed on PCIe.
      const std::string& kind = devices::BuiltinRegistry().Get(cli.device).prefix;
      // measure: the preset below until the farm answers (cli_commands.cc);
      // the embedded workers then own the devices, so they can time it.
      cli.measure_link = link == "measure";
      if (cli.measure_link) cli.farm.local_backend_options.devices = list.count();
      cli.multi.link = link_option->count() > 0 && !cli.measure_link ? hios::ParseLink(link)
                       : kind == "cpu" ? hios::PresetLink(hios::LinkKind::kHost)
                       : kind == "sim" ? hios::PresetLink(hios::LinkKind::kNvlink)
                                       : hios::PresetLink(hios::LinkKind::kPcie);
    } catch (const Error& e) {
      std::fprintf(stderr, "ios-coordinator: error: %s\n", e.what());
      return 2;
    }
  }
  // The device's kind decides its defaults, not the look of its name.
  const DeviceTiming timing = devices::BuiltinRegistry().TimingOf(cli.device);
  {
    MeasureOverrides& g = cli.measure_given;
    if (warmup->count() > 0) g.warmup = given.warmup;
    if (number->count() > 0) g.number = given.number;
    if (repeat->count() > 0) g.repeat = given.repeat;
    if (max_repeat->count() > 0) g.max_repeat = given.max_repeat;
    if (max_spread->count() > 0) g.max_spread = max_spread_percent / 100;
    cli.search.settings = MeasureSettingsFor(timing, g);
  }
  cli.search.verify.enabled = !no_verify;
  cli.search.verify.settings = DefaultVerifySettings(timing);
  cli.search.measure = cli.measure == "all" ? MeasureMode::kAll : MeasureMode::kLazy;
  if (bound_margin->count() > 0) cli.search.bound_margin = bound_margin_percent / 100;
  // Options of the search that pricing a given schedule would silently
  // ignore: given with --evaluate, they are a mistake worth saying.
  for (const char* name : {"--model",
                           "--out",
                           "--strategy",
                           "-r",
                           "-s",
                           "--no-pruning",
                           "--max-part-size",
                           "--max-dp-states",
                           "--max-dp-transitions",
                           "--max-dp-stages",
                           "--max-search-stages",
                           "--no-baselines",
                           "--measure",
                           "--blocks",
                           "--bound-margin",
                           "--sub-stage-bounds",
                           "--verify",
                           "--bound-violations-max-fraction",
                           "--memory-budget",
                           "--objective",
                           "--memory-front"}) {
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
    if (!cli.memory_budget.empty()) {
      try {
        cli.search.memory.budget_bytes = ParseByteSize(cli.memory_budget);
      } catch (const Error& e) {
        std::fprintf(stderr, "ios-coordinator: error: --memory-budget: %s\n", e.what());
        return 2;
      }
    }
    if (cli.objective == "memory") {
      cli.search.memory.objective = MemoryOptions::Objective::kMemory;
    }
    cli.search.dp.strategies = cli.strategy == "parallel" ? StrategySet::kParallel
                               : cli.strategy == "merge"  ? StrategySet::kMerge
                                                          : StrategySet::kBoth;
    if (cli.no_pruning) {
      cli.search.dp.max_group_size = DpOptions::kMaxPartSize;
      cli.search.dp.max_groups = DpOptions::kMaxPartSize;
    }
    if (!cli.report.empty() && cli.memory_front > 0) {
      std::fprintf(stderr,
                   "ios-coordinator: error: --report is not used with --memory-front yet; report "
                   "one search of the front (--memory-budget B, or --objective memory)\n");
      return 2;
    }
    if (!cli.report.empty()) {  // before any work, like --out
      const std::string problem = ReportPathProblem(cli.report);
      if (!problem.empty()) {
        std::fprintf(stderr, "ios-coordinator: error: --report %s: %s\n", cli.report.c_str(),
                     problem.c_str());
        return 2;
      }
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
    if (cli.specialize) return Specialize(cli);
    return cli.memory_front > 0 ? SearchFront(cli) : Search(cli);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ios-coordinator: error: %s\n", e.what());
    return 1;
  }
}
