// ios-coordinator --specialize: the specialization matrix (coordinator/
// specialize.h) over --batch's list and every --device, printed on stdout as
// text, CSV or JSON, and with --report drawn as a heat map beside each
// schedule; progress, the device lines and "report written" go to stderr.
#include <spdlog/spdlog.h>

#include <charconv>
#include <cstdio>
#include <iostream>
#include <optional>
#include <string>
#include <system_error>
#include <vector>

#include "common/error.h"
#include "coordinator/cli.h"
#include "coordinator/cli_farm.h"
#include "coordinator/cli_progress.h"
#include "coordinator/report_input.h"
#include "coordinator/schedule_json.h"
#include "coordinator/specialize.h"
#include "db/profile_store.h"
#include "devices/registry.h"
#include "report/report.h"

namespace ios::coordinator::cli {
namespace {

std::string Join(const std::vector<int>& values) {
  std::string text;
  for (const int v : values) text += (text.empty() ? "" : ",") + std::to_string(v);
  return text;
}

}  // namespace

MeasureSettings MeasureSettingsFor(DeviceTiming timing, const MeasureOverrides& given) {
  MeasureSettings settings = DefaultMeasureSettings(timing);
  if (given.warmup) settings.warmup = *given.warmup;
  if (given.number) settings.number = *given.number;
  if (given.repeat) settings.repeat = *given.repeat;
  if (given.max_repeat) settings.max_repeat = *given.max_repeat;
  // --max-repeat alone keeps the device's own spread (cuda's 3%); it takes
  // --max-spread's default (5%) only where the device has none (sim).
  if (given.max_spread) {
    settings.max_relative_spread = *given.max_spread;
  } else if (given.max_repeat && !(settings.max_relative_spread > 0)) {
    settings.max_relative_spread = 0.05;
  }
  return settings;
}

std::vector<int> ParseBatchList(const std::string& text) {
  constexpr int kMax = 1 << 20;  // as --batch's range always was
  std::vector<int> batches;
  size_t start = 0;
  while (true) {
    const size_t comma = text.find(',', start);
    const std::string entry =
        text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    long long value = 0;
    const char* end = entry.data() + entry.size();
    const auto [at, error] = std::from_chars(entry.data(), end, value);
    if (entry.empty() || error == std::errc::invalid_argument || at != end) {
      throw Error("--batch " + text + ": '" + entry +
                  "' is not a batch size (a whole number from " + "1 to " + std::to_string(kMax) +
                  ")");
    }
    if (error == std::errc::result_out_of_range || value < 1 || value > kMax) {
      // Worded as CLI11 worded it when --batch was a number.
      throw Error("--batch: Value " + entry + " not in range 1 to " + std::to_string(kMax));
    }
    batches.push_back(static_cast<int>(value));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return batches;
}

std::string SpecializeOptionProblem(const CliOptions& cli, bool devices_given) {
  if (!cli.specialize) {
    if (cli.batches.size() > 1) {
      return "--batch takes a list of batch sizes only with --specialize";
    }
    // Devices cannot be a comma list: a device's own options use commas
    // (cpu,threads=1).
    if (cli.devices.size() > 1) {
      return "--device is given " + std::to_string(cli.devices.size()) +
             " times; several devices are compared only with --specialize (one schedule over "
             "several devices: --devices)";
    }
    if (!cli.format.empty()) return "--format applies to --specialize only";
    return "";
  }
  if (!cli.evaluate.empty()) return "--specialize is not used with --evaluate";
  if (cli.model.empty()) return "--specialize needs --model";
  if (!cli.out.empty()) {
    return "--out is not used with --specialize (it searches one schedule per batch size and "
           "device; --format json prints them all)";
  }
  if (devices_given) {
    return "--specialize compares devices given as --device D --device E; it is not used with "
           "--devices";
  }
  if (cli.memory_front > 0) return "--specialize is not used with --memory-front";
  // A setting twice would be a row and a column twice.
  for (size_t i = 0; i < cli.batches.size(); ++i) {
    for (size_t j = 0; j < i; ++j) {
      if (cli.batches[i] == cli.batches[j]) {
        return "--batch " + Join(cli.batches) + ": batch size " + std::to_string(cli.batches[i]) +
               " is given twice";
      }
    }
  }
  for (size_t i = 0; i < cli.devices.size(); ++i) {
    for (size_t j = 0; j < i; ++j) {
      if (cli.devices[i] == cli.devices[j]) {
        return "--device " + cli.devices[i] + " is given twice";
      }
    }
  }
  // One farm per device, each with its own embedded workers: remote
  // workers bound to one endpoint could not say which device's farm to join.
  if (cli.bind_given && cli.devices.size() > 1) {
    return "--bind serves one device; with several --device, --specialize measures through "
           "embedded workers only (leave --bind out)";
  }
  return "";
}

int Specialize(CliOptions cli) {
  const std::string started_at = NowUtc();
  // main checked the first device; the others before anything starts.
  for (size_t d = 1; d < cli.devices.size(); ++d) {
    CliOptions one = cli;
    one.device = cli.devices[d];
    if (const std::string problem = FarmOptionProblem(one); !problem.empty()) {
      std::fprintf(stderr, "ios-coordinator: error: %s\n", problem.c_str());
      return 2;
    }
  }
  auto [graph, model_name] = ResolveModel(cli);
  auto store = db::ProfileStore::Open(cli.db);
  SayWhatIsKeptOnInterrupt(cli.db);
  std::vector<RunningFarm> farms;
  std::vector<SpecializeDevice> devices;
  farms.reserve(cli.devices.size());
  for (const std::string& name : cli.devices) {
    CliOptions one = cli;
    one.device = name;
    farms.push_back(StartFarm(one));
    const DeviceTiming timing = devices::BuiltinRegistry().TimingOf(name);
    devices.push_back({name, &*farms.back(), MeasureSettingsFor(timing, cli.measure_given),
                       DefaultVerifySettings(timing)});
  }
  // stdout holds only the matrix: what each device's figures are goes here.
  for (const SpecializeDevice& d : devices) {
    const DeviceInfo& info = d.measurer->Device();
    std::fprintf(stderr, "ios-coordinator: specializing %s at batch %s on %s, %s\n",
                 model_name.c_str(), Join(cli.batches).c_str(), info.name.c_str(),
                 info.simulated ? "SIMULATED latencies (an analytical model, not a measurement)"
                                : "measured latencies");
  }
  ProgressPrinter progress(cli.quiet);
  SpecializeHooks hooks;
  hooks.note = [&cli](const std::string& line) {
    if (!cli.quiet) std::fprintf(stderr, "specialize: %s\n", line.c_str());
  };
  hooks.progress = std::ref(progress);
  // Each search is recorded as a plain search of its setting is, its
  // report included, so that `ios-db searches` and `ios-db report` show it.
  std::optional<SearchOutcome> first;  // its sequential schedule: operators' latencies alone
  // Named captures: clang before 16 cannot capture structured bindings.
  hooks.searched = [&cli, &store, &first, &started_at, &graph = graph, &model_name = model_name](
                       size_t setting, const SearchOutcome& outcome) {
    CliOptions one = cli;
    one.search = outcome.options;
    ScheduleInfo info{model_name, outcome.device, outcome.options.batch_size, outcome.options, {},
                      {}};
    if (cli.baselines) {
      info.sequential_ms = outcome.sequential.latency_ms;
      info.greedy_ms = outcome.greedy.latency_ms;
    }
    db::SearchRecord record = RecordOf(one, graph, outcome, outcome.Returned(), info, started_at);
    report::ReportInput page = ReportOfSearch(graph, outcome, outcome.device, nullptr);
    if (!cli.baselines) {  // not asked for, so not shown (as Search does)
      std::erase_if(page.schedules,
                    [](const auto& s) { return s.name == "sequential" || s.name == "greedy"; });
    }
    page.tool = "ios-coordinator --specialize";
    page.version = IOS_FARM_VERSION;
    page.generated_at = started_at;
    record.report_json = report::ToJson(page, /*with_graph=*/false);
    store->RecordSearch(record);
    if (setting == 0 && !cli.report.empty()) first = outcome;
  };
  const SpecializationMatrix matrix =
      RunSpecialization(graph, model_name, cli.batches, devices, cli.search, *store, hooks);
  const std::string format = cli.format.empty() ? "text" : cli.format;
  std::cout << (format == "csv"    ? FormatMatrixCsv(matrix)
                : format == "json" ? FormatMatrixJson(matrix)
                                   : FormatMatrixText(matrix));
  std::cout.flush();
  if (!cli.report.empty()) {
    // stdout holds the matrix alone (it may be parsed as CSV or JSON).
    WriteReportFile(cli.report, ReportOfSpecialization(graph, matrix, first ? &*first : nullptr),
                    "ios-coordinator --specialize", stderr);
  }
  return 0;
}

}  // namespace ios::coordinator::cli
