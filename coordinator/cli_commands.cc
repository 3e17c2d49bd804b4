// What ios-coordinator runs: a search (--model) or the pricing of a given
// schedule (--evaluate), each ending with its figures measured end to end.
#include <spdlog/spdlog.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "common/blocks.h"
#include "common/error.h"
#include "common/input_file.h"
#include "common/ios_json.h"
#include "common/model_source.h"
#include "common/printable.h"
#include "coordinator/cli.h"
#include "coordinator/cli_farm.h"
#include "coordinator/cli_progress.h"
#include "coordinator/measured_link.h"
#include "coordinator/memory_front.h"
#include "coordinator/pricing.h"
#include "coordinator/report.h"
#include "coordinator/report_input.h"
#include "coordinator/schedule_json.h"
#include "coordinator/weight_warmth.h"
#include "db/profile_store.h"
#include "onnx/model_loader.h"
#include "onnx/onnx_import.h"
#include "report/report.h"

namespace ios::coordinator::cli {

// A zoo name, or else a path to an IOS JSON or ONNX file. The search needs
// only the graph: an ONNX file's weights change no latency.
std::pair<Graph, std::string> ResolveModel(const CliOptions& cli) {
  const std::string& model = cli.model;
  const auto start = std::chrono::steady_clock::now();
  ModelWithWeights loaded = LoadAnyModel(model);
  for (const std::string& warning : loaded.warnings) spdlog::warn("{}", warning);
  if (onnx_import::IsOnnxPath(model)) {
    const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
    spdlog::info("{}: imported in {:.3f} s ({} operators, {} rewrites)", model, took.count(),
                 loaded.model.graph.OperatorCount(), loaded.notes.size());
  }
  if (cli.blocks == "auto") {
    SetAutomaticBlocks(loaded.model.graph);
    InferShapes(loaded.model.graph);
  }
  return {std::move(loaded.model.graph), std::move(loaded.model.name)};
}

std::string NowUtc() {
  const std::time_t t = std::time(nullptr);
  char buffer[32];
  std::strftime(buffer, sizeof buffer, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buffer;
}

std::string OutputProblem(const std::string& path) {
  return path == "-" ? "" : OutputFileProblem(path);
}

namespace {

void WriteOutput(const std::string& path, const std::string& text) {
  if (path == "-") {
    std::cout << text;
    return;
  }
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  if (!out) throw Error(path + ": cannot write the schedule file");
}

// Said on stderr when stdout carries the schedule.
void WriteReport(const CliOptions& cli, report::ReportInput input, const std::string& tool) {
  WriteReportFile(cli.report, std::move(input), tool, cli.out == "-" ? stderr : stdout);
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

// A long DP walk (the library calls at most once a second).
std::function<void(const PlanProgress&)> PlanProgressPrinter(bool quiet) {
  return [quiet](const PlanProgress& p) {
    if (quiet) return;
    std::fprintf(stderr,
                 "enumerate: block %d part %d (%d operators): %lld states, %lld transitions, "
                 "%lld stages so far, %.0f s\n",
                 p.block, p.part, p.dp.operators, static_cast<long long>(p.dp.states),
                 static_cast<long long>(p.dp.transitions), static_cast<long long>(p.dp.stages),
                 p.dp.elapsed_s);
  };
}

}  // namespace

// The page is written whole; the path was checked before any work.
void WriteReportFile(const std::string& path, report::ReportInput input, const std::string& tool,
                     std::FILE* said_on) {
  input.tool = tool;
  input.version = IOS_FARM_VERSION;
  input.generated_at = NowUtc();
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << report::RenderHtml(input);
  if (!out) throw Error(path + ": cannot write the report");
  std::fprintf(said_on, "report written to %s\n", path.c_str());
  std::fflush(said_on);
}

db::SearchRecord RecordOf(const CliOptions& cli, const Graph& graph, const SearchOutcome& outcome,
                          const Schedule& returned, const ScheduleInfo& info,
                          const std::string& started_at) {
  db::SearchRecord record;
  record.model = outcome.model;
  record.device_fingerprint = outcome.device.fingerprint;
  record.batch_size = cli.search.batch_size;
  record.settings_json = "{\"strategy\":\"" + cli.strategy +
                         "\",\"r\":" + std::to_string(cli.search.dp.max_group_size) +
                         ",\"s\":" + std::to_string(cli.search.dp.max_groups) + ",\"settings\":\"" +
                         cli.search.settings.Key() + "\",\"measure\":\"" + cli.measure +
                         "\",\"returned\":\"" + outcome.ReturnedName() + "\",\"verified\":" +
                         std::to_string(outcome.verification.candidates.size());
  if (outcome.table.stats.lazy) {
    // What the lazy search's bounds were worth (docs/search-cost.md).
    record.settings_json +=
        ",\"bound_violations\":" + std::to_string(outcome.table.stats.bound_violations) +
        ",\"parts_measured_in_full\":" + std::to_string(outcome.table.stats.parts_measured_in_full);
  }
  record.settings_json += "}";
  // Compact in the DB: a NASNet schedule with its graph is 255 KB so, 792 KB indented.
  record.schedule_json = ScheduleToJson(graph, returned, info, JsonLayout::kCompact);
  record.latency_ms = returned.latency_ms;
  record.stages_measured = outcome.table.stats.measured;
  record.stages_reused = outcome.table.stats.reused;
  record.enumerate_s = outcome.enumerate_s;
  record.measure_s = outcome.measure_s;
  record.solve_s = outcome.solve_s;
  record.started_at = started_at;
  return record;
}

int Search(CliOptions cli) {
  const std::string started_at = NowUtc();
  auto [graph, model_name] = ResolveModel(cli);
  auto store = db::ProfileStore::Open(cli.db);
  SayWhatIsKeptOnInterrupt(cli.db);
  auto farm = StartFarm(cli);
  DecideWeightWarmth(graph, cli.search.batch_size, farm->Device(), cli.search.settings);
  AnnounceDevice(cli, *farm, "searching " + model_name);
  ProgressPrinter progress(cli.quiet);
  const auto plan_progress = PlanProgressPrinter(cli.quiet);
  SearchOutcome outcome =
      RunSearch(graph, model_name, cli.search, *store, *farm, std::ref(progress), plan_progress);
  ScheduleInfo info{model_name, outcome.device, cli.search.batch_size, cli.search, {}, {}};
  if (cli.baselines) {
    info.sequential_ms = outcome.sequential.latency_ms;
    info.greedy_ms = outcome.greedy.latency_ms;
  }
  // The fastest schedule as it runs, when verification measured any.
  const Schedule& returned = outcome.Returned();
  const std::string schedule_json = ScheduleToJson(graph, returned, info);
  db::SearchRecord record = RecordOf(cli, graph, outcome, returned, info, started_at);
  // With --devices: HIOS over them, from the same DB and farm; its file is the output.
  std::optional<MultiDeviceOutcome> multi;
  std::string out_json = schedule_json;
  std::string link_text;  // --link measure's figures, printed with the multi-device report
  if (cli.device_count > 1) {
    if (cli.measure_link) {
      const MeasuredLink link = MeasureOrReuseLink(*store, *farm, cli.device_count, cli.link_query);
      cli.multi.link = link.link;
      link_text = FormatMeasuredLink(link);
    }
    multi = ScheduleMultiDevice(graph, cli.multi, cli.search, *store, *farm, std::ref(progress));
    // More devices must never cost more: where HIOS loses to the one-device
    // schedule, that schedule is written, on device 0.
    if (!cli.force_devices && !(multi->multi_device_ms < returned.latency_ms)) {
      KeepOnOneDevice(graph, returned, cli.search.batch_size, *multi);
    }
    MultiScheduleInfo multi_info;
    multi_info.model = model_name;
    multi_info.batch_size = cli.search.batch_size;
    multi_info.mapper = hios::ToString(cli.multi.hios.mapper);
    multi_info.window = cli.multi.hios.window.window;
    multi_info.streams = cli.multi.hios.window.streams;
    multi_info.simulated = outcome.device.simulated;
    multi_info.predicted_ms = multi->predicted_ms;
    multi_info.single_device_ms = returned.latency_ms;
    if (cli.baselines) multi_info.sequential_ms = outcome.sequential.latency_ms;
    out_json = MultiScheduleToJson(graph, multi->schedule, multi_info);
  }
  if (!cli.out.empty()) WriteOutput(cli.out, out_json);  // fails before anything is recorded
  // The report's input, kept with the search's record too, so that
  // `ios-db report` shows this search later as --report shows it now.
  report::ReportInput page =
      ReportOfSearch(graph, outcome, outcome.device, multi ? &*multi : nullptr);
  if (!cli.baselines) {  // not asked for, so not shown
    std::erase_if(page.schedules,
                  [](const auto& s) { return s.name == "sequential" || s.name == "greedy"; });
  }
  page.tool = "ios-coordinator search";
  page.version = IOS_FARM_VERSION;
  page.generated_at = started_at;
  record.report_json = report::ToJson(page, /*with_graph=*/false);
  store->RecordSearch(record);
  if (cli.out != "-") {
    std::cout << (outcome.ReturnedName() == "ios"
                      ? std::string("IOS schedule")
                      : "Returned schedule (" + outcome.ReturnedName() + ")")
              << (outcome.device.simulated ? " (simulated latencies)" : "") << ":\n"
              << DescribeSchedule(graph, returned) << "\n";
    if (!cli.baselines) {
      outcome.sequential.latency_ms = NAN;
      outcome.greedy.latency_ms = NAN;
    }
    std::cout << FormatReport(graph, outcome) << FormatVerification(outcome);
    if (multi) {
      std::cout << "\n"
                << link_text
                << FormatMultiDevice(graph, *multi, cli.multi, outcome.device.simulated);
      std::printf("  speed-up over one device's schedule (%s, %.3f ms): %.2fx%s\n",
                  outcome.ReturnedName().c_str(), returned.latency_ms,
                  returned.latency_ms / multi->multi_device_ms,
                  outcome.device.simulated ? " (simulated)" : "");
      if (multi->one_device_kept) {
        std::printf("  written: the one-device schedule on device 0 (HIOS is not faster here)\n");
      }
      std::fflush(stdout);
    }
    if (!cli.out.empty()) {
      std::cout << (multi ? "multi-device schedule" : "schedule") << " written to " << cli.out
                << "\n";
    }
    std::cout.flush();
    std::cout << FormatWorkers(farm->Workers());
  }
  if (!cli.report.empty()) WriteReport(cli, std::move(page), "ios-coordinator search");
  return 0;
}

int SearchFront(CliOptions cli) {
  const std::string started_at = NowUtc();
  auto [graph, model_name] = ResolveModel(cli);
  auto store = db::ProfileStore::Open(cli.db);
  SayWhatIsKeptOnInterrupt(cli.db);
  auto farm = StartFarm(cli);
  DecideWeightWarmth(graph, cli.search.batch_size, farm->Device(), cli.search.settings);
  AnnounceDevice(cli, *farm, "the memory front of " + model_name);
  // One printer for every search: its count of what was measured runs on.
  ProgressPrinter progress(cli.quiet);
  const auto plan_progress = PlanProgressPrinter(cli.quiet);
  auto step = [&cli](const MemoryFrontStep& s) {
    if (cli.quiet) return;
    std::fprintf(stderr, "memory front: search %d of %d: %s\n", s.index + 1, s.count,
                 DescribeFrontSearch(s.kind, s.budget_bytes).c_str());
  };
  MemoryFrontOptions front_options;
  front_options.points = cli.memory_front;
  front_options.at_sequential_peak = cli.baselines;
  MemoryFront front = SearchMemoryFront(graph, model_name, cli.search, front_options, *store, *farm,
                                        step, std::ref(progress), plan_progress);
  // What --out writes: the unconstrained search's returned schedule, or
  // the one the memory options given beside --memory-front ask for (they
  // choose nothing else).
  std::optional<SearchOutcome> asked;
  if (cli.search.memory.active() && !cli.out.empty()) {
    if (!cli.quiet) {
      const std::string what = cli.search.memory.objective == MemoryOptions::Objective::kMemory
                                   ? "--objective memory"
                                   : "--memory-budget " + cli.memory_budget;
      std::fprintf(stderr, "memory front: the schedule to write: %s\n", what.c_str());
    }
    asked =
        RunSearch(graph, model_name, cli.search, *store, *farm, std::ref(progress), plan_progress);
  }
  const SearchOutcome& written = asked ? *asked : front.unconstrained;
  ScheduleInfo info{model_name, written.device, cli.search.batch_size, written.options, {}, {}};
  if (cli.baselines) {
    info.sequential_ms = written.sequential.latency_ms;
    info.greedy_ms = written.greedy.latency_ms;
  }
  const Schedule& returned = written.Returned();
  if (!cli.out.empty()) WriteOutput(cli.out, ScheduleToJson(graph, returned, info));
  store->RecordSearch(RecordOf(cli, graph, written, returned, info, started_at));
  if (!cli.baselines) {
    front.unconstrained.sequential.latency_ms = NAN;
    front.unconstrained.greedy.latency_ms = NAN;
  }
  // With --out - the schedule owns stdout: the table goes to stderr.
  std::FILE* table = cli.out == "-" ? stderr : stdout;
  std::fputs(FormatMemoryFront(graph, front).c_str(), table);
  if (!cli.out.empty()) {
    const std::string which = !asked ? "the unconstrained search's"
                              : cli.search.memory.objective == MemoryOptions::Objective::kMemory
                                  ? "the least-peak search's (--objective memory)"
                                  : "the search's under --memory-budget " + cli.memory_budget;
    std::fprintf(table, "written to %s: %s schedule (%s), %.3f ms%s at a peak of %s\n",
                 cli.out.c_str(), which.c_str(), written.ReturnedName().c_str(),
                 returned.latency_ms, written.device.simulated ? " (simulated)" : "",
                 FormatBytes(returned.peak_bytes).c_str());
  }
  std::fflush(table);
  if (cli.out != "-") std::cout << FormatWorkers(farm->Workers());
  return 0;
}

int Evaluate(CliOptions cli) {
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
  DecideWeightWarmth(loaded.graph, cli.search.batch_size, farm->Device(), cli.search.settings);
  AnnounceDevice(cli, *farm, "pricing " + cli.evaluate);
  ProgressPrinter progress(cli.quiet);
  const PricedSchedule pricing =
      PriceBlocks(loaded.graph, loaded.blocks, cli.search, *store, *farm, std::ref(progress));
  const Schedule& priced = pricing.schedule;
  const LatencyTable& table = pricing.table;
  const DeviceInfo& device = farm->Device();
  std::printf("schedule %s (%s format, %zu distinct stages)\n", cli.evaluate.c_str(),
              loaded.origin.c_str(), pricing.distinct_stages);
  std::printf("device %s%s, batch %d: %.3f ms%s\n", device.name.c_str(),
              device.simulated ? " (SIMULATED)" : "", cli.search.batch_size, priced.latency_ms,
              device.simulated ? " (simulated)" : "");
  std::printf("stages measured %lld, reused from DB %lld, failed %lld\n",
              static_cast<long long>(table.stats.measured),
              static_cast<long long>(table.stats.reused),
              static_cast<long long>(table.stats.failed));
  std::optional<VerifiedSchedule> verified;  // for --report
  if (cli.search.verify.enabled && std::isfinite(priced.latency_ms)) {
    const VerifiedSchedule& run = verified.emplace(VerifySchedule(
        loaded.graph, loaded.graph.name, cli.evaluate, priced, cli.search, device, *store, *farm));
    const MeasureResult& m = run.measured;
    if (m.ok()) {
      std::printf(
          "end to end: %.3f ms%s (median, spread %.3f ms, %d runs; %s), %.2fx the DP's sum\n",
          m.median_ms, device.simulated ? " (simulated)" : "", m.spread_ms, m.samples,
          run.reused ? "from the DB" : "measured now", m.median_ms / priced.latency_ms);
    } else {
      std::printf("end to end: %s: %s\n", ToString(m.error), m.error_message.c_str());
    }
  }
  if (!cli.report.empty()) {
    const EvaluationFacts facts{cli.evaluate,
                                priced,
                                pricing.plan,
                                table,
                                device,
                                cli.search.batch_size,
                                cli.search.settings,
                                verified ? &*verified : nullptr};
    WriteReport(cli, ReportOfEvaluation(loaded.graph, facts, *store), "ios-coordinator --evaluate");
  }
  return std::isfinite(priced.latency_ms) ? 0 : 2;
}

}  // namespace ios::coordinator::cli
