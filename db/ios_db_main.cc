// ios-db: query the profiling DB (devices, stats, searches, measurements,
// end-to-end runs), export its measurements as CSV or JSON, import another
// farm's export, forget measurements, and write a stored search's HTML
// report. Queries open the file read-only
// (also in a read-only folder); only `import` and `forget` write, and only
// `import` creates a DB.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/input_file.h"
#include "common/printable.h"
#include "db/listing.h"
#include "db/measurement_import.h"
#include "db/profile_store.h"
#include "db/query_listings.h"
#include "db/stored_report.h"

namespace {

using ios::db::Column;
using ios::db::Format;
using ios::db::json;
using ios::db::Listing;
using ios::db::ParseFormat;
using ios::db::Print;
enum class Command {
  kDevices,
  kStats,
  kSearches,
  kMeasurements,
  kRuns,
  kExport,
  kImport,
  kForget,
  kReport
};

//! Everything main() parsed from the command line.
struct Options {
  std::string db_path;
  std::string format_name = "table";
  bool format_given = false;
  Command command = Command::kStats;
  std::string model;   // measurements and runs --model; empty: all
  int limit = 0;       // measurements --limit; 0: all
  std::string output;  // export --output; "-": stdout
  std::string device;  // export: only this device; import: the receiving device
  std::string input;   // import: the file
  std::string settings;
  bool force = false;
  // forget: what to drop and the filters.
  bool forget_failures = false, forget_measurements = false, forget_all = false;
  bool forget_runs_only = false, forget_keep_runs = false;  // end-to-end figures
  std::vector<std::string> forget_kinds;
  std::string forget_device, forget_model;
  ios::db::SearchQuery report;  // report: which search (--search, or --model/--batch/--device)
};

// A command line naming something that cannot be (a search the DB does not
// hold, an output that cannot be written): exit code 2, as a bad argument.
class BadArgument : public ios::Error {
 public:
  using Error::Error;
};

std::string NowIso() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buffer[32];
  std::strftime(buffer, sizeof buffer, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buffer;
}

// report: the page of the latest search the query names.
void Report(const Options& options, ios::db::ProfileStore& store) {
  const ios::db::SearchRecord search = ios::db::FindSearch(store, options.report, options.db_path);
  const std::string page =
      ios::db::RenderStoredReport(store, search, {"ios-db report", IOS_FARM_VERSION, NowIso()});
  std::ofstream out(options.output, std::ios::binary | std::ios::trunc);
  out << page;
  out.close();
  if (!out) throw ios::Error("failed writing the report to " + options.output);
  std::cout << "wrote the report of search " << search.id << " (" << search.model << ", batch "
            << search.batch_size << (search.report_json.empty() ? ", partial" : "") << ") to "
            << options.output << '\n';
}

// The failure kinds `forget --kind` accepts, and "transient" for all of
// those a search measures again.
constexpr const char* kTransientKinds = "transient";
const std::vector<ios::MeasureError>& FailureKinds() {
  static const std::vector<ios::MeasureError> kinds = {
      ios::MeasureError::kOutOfMemory, ios::MeasureError::kUnsupported,
      ios::MeasureError::kBackendFailure, ios::MeasureError::kTimeout};
  return kinds;
}

// export: --format when given, else the output file's extension.
Format ExportFormat(const Options& options) {
  if (options.format_given) {
    if (options.format_name == "table") {
      throw ios::Error("export writes csv or json, not a table: use --format csv or --format json");
    }
    return ParseFormat(options.format_name);
  }
  if (options.output == "-") {
    throw ios::Error("export to stdout ('-') needs --format csv or --format json");
  }
  const std::string extension = std::filesystem::path(options.output).extension().string();
  if (extension == ".csv") return Format::kCsv;
  if (extension == ".json") return Format::kJson;
  throw ios::Error("cannot tell the export format of '" + options.output +
                   "': name it .csv or .json, or pass --format csv|json");
}

// forget: checks the flags, then drops what they select and says how many.
// End-to-end figures (network_runs) go with the measurements of the same
// selection unless --keep-runs: whoever re-measures a device's stages wants
// its whole-network figures taken again too, not stale ones shown beside
// fresh predictions. --runs-only drops the figures alone.
void Forget(const Options& options, ios::db::ProfileStore& store) {
  if (!options.forget_failures && !options.forget_measurements) {
    throw ios::Error(
        "forget: say what to drop: --failures (failed measurements) and/or --measurements "
        "(every measurement, good or failed)");
  }
  if (!options.forget_kinds.empty() && options.forget_measurements) {
    throw ios::Error("forget: --kind narrows --failures; it cannot be used with --measurements");
  }
  if (options.forget_runs_only && options.forget_keep_runs) {
    throw ios::Error(
        "forget: --runs-only drops only end-to-end figures and --keep-runs keeps them: give one");
  }
  const bool filtered = !options.forget_device.empty() || !options.forget_model.empty() ||
                        !options.forget_kinds.empty();
  if (options.forget_all && filtered) {
    throw ios::Error(
        "forget: --all drops everything; it cannot be combined with --device, "
        "--model or --kind");
  }
  if (options.forget_measurements && !filtered && !options.forget_all) {
    throw ios::Error(
        "forget --measurements drops good measurements too, which take time to measure again: "
        "narrow it with --device or --model, or pass --all to drop every measurement");
  }
  ios::db::ForgetFilter filter;
  filter.failures = true;
  filter.successes = options.forget_measurements;
  for (const std::string& kind : options.forget_kinds) {
    for (ios::MeasureError error : FailureKinds()) {
      if (kind == ios::ToString(error) || (kind == kTransientKinds && ios::IsTransient(error))) {
        filter.kinds.push_back(error);
      }
    }
  }
  filter.device = options.forget_device;
  filter.model = options.forget_model;
  // A device or model only end-to-end figures name (an --evaluate of a
  // schedule file) is known too.
  const std::vector<ios::db::NetworkRunRow> runs = filter.device.empty() && filter.model.empty()
                                                       ? std::vector<ios::db::NetworkRunRow>{}
                                                       : store.NetworkRuns(filter.model);
  if (!filter.device.empty()) {
    bool known = false;
    for (const ios::db::DeviceRow& device : store.Devices()) {
      known = known || device.name == filter.device || device.fingerprint == filter.device;
    }
    for (const ios::db::NetworkRunRow& run : runs) {
      known = known || run.key.device_fingerprint == filter.device;
    }
    if (!known) {
      throw ios::Error("forget: no device named or fingerprinted '" + filter.device + "' in " +
                       options.db_path + " (see ios-db devices)");
    }
  }
  if (!filter.model.empty()) {
    const std::vector<std::string> models = store.Models();
    if (std::find(models.begin(), models.end(), filter.model) == models.end() && runs.empty()) {
      throw ios::Error("forget: no model named '" + filter.model + "' in " + options.db_path +
                       " (models are recorded by the searches that used them)");
    }
  }
  int64_t measurements = 0, figures = 0;
  // Both tables or neither: a forget that fails halfway leaves the DB as it was.
  store.RunInTransaction([&] {
    if (!options.forget_runs_only) measurements = store.ForgetMeasurements(filter);
    if (!options.forget_keep_runs) figures = store.ForgetNetworkRuns(filter);
  });
  const std::string failed = options.forget_measurements ? "" : "failed ";
  std::string what;
  if (!options.forget_runs_only)
    what = std::to_string(measurements) + " " + failed + "measurements";
  if (!options.forget_runs_only && !options.forget_keep_runs) what += " and ";
  if (!options.forget_keep_runs) {
    what += std::to_string(figures) + " " + failed + "end-to-end figures";
  }
  if (!options.forget_kinds.empty()) {
    std::string kinds;
    for (const std::string& kind : options.forget_kinds) {
      kinds += (kinds.empty() ? "" : ", ") + kind;
    }
    what += " (" + kinds + ")";
  }
  if (!filter.device.empty()) what += " of device " + filter.device;
  if (!filter.model.empty()) what += " of model " + filter.model;
  std::cout << "dropped " << what << " from " << options.db_path << '\n';
}

// The largest import file read (a JSON export takes ~400 bytes a row: about
// 650,000 measurements): a bound on the memory one bad argument can take.
constexpr std::uintmax_t kMaxImportFileBytes = std::uintmax_t{256} << 20;

// import: another farm's JSON export, the rows this DB's searches can use.
// Importing nothing new is an error unless every row was here already.
void Import(const Options& options, ios::db::ProfileStore& store) {
  const std::string text = ios::ReadInputFile(options.input, "JSON export", kMaxImportFileBytes);
  const ios::db::ImportReport report = ios::db::ImportMeasurements(
      store, text, options.input, {options.device, options.settings, options.force});
  std::cout << "imported " << report.imported << " of " << report.rows << " measurements from "
            << options.input << " into " << options.db_path;
  if (report.present > 0) std::cout << "; " << report.present << " already here (kept ours)";
  std::cout << '\n';
  for (const auto& [reason, count] : report.refused) {
    std::cout << "refused " << count << ": " << reason << '\n';
  }
  if (!report.refused.empty()) {
    std::cout << "(--force takes refused rows too, each under its own device and settings)\n";
  }
  if (report.rows == 0) throw ios::Error("import: " + options.input + " holds no measurements");
  if (report.imported == 0 && report.present == 0) {
    throw ios::Error("import: nothing imported from " + options.input +
                     ": every row was refused (reasons above)");
  }
}

// The DB must exist: querying never creates one.
void RequireExistingDb(const std::string& path) {
  std::error_code error;
  const auto status = std::filesystem::status(path, error);
  if (!std::filesystem::exists(status)) throw ios::Error("no profiling DB at " + path);
  // A directory: ProfileStore::Open says so.
  if (std::filesystem::file_size(path, error) == 0 && !error) {
    throw ios::Error("no profiling DB at " + path + " (the file is empty)");
  }
}

void Run(const Options& options) {
  if (options.command == Command::kReport) {
    // Before opening the DB: a typo in the path costs nothing.
    if (const std::string problem = ios::OutputFileProblem(options.output); !problem.empty()) {
      throw BadArgument("report --output " + options.output +
                        ": cannot write the report there: " + problem);
    }
  }
  const Format format = ParseFormat(options.format_name);
  const Format export_format = options.command == Command::kExport ? ExportFormat(options) : format;
  // Queries never change the file; forget and import write, and import
  // creates a DB that does not exist yet.
  ios::db::OpenOptions open;
  std::error_code error;
  if (options.command == Command::kImport && !std::filesystem::exists(options.db_path, error)) {
    open.mode = ios::db::OpenMode::kCreate;
    // The import file first: a typo must not leave an empty DB behind.
    ios::CheckInputFile(options.input, "JSON export", kMaxImportFileBytes);
  } else {
    RequireExistingDb(options.db_path);
    const bool writes = options.command == Command::kForget || options.command == Command::kImport;
    open.mode = writes ? ios::db::OpenMode::kReadWrite : ios::db::OpenMode::kReadOnly;
  }
  std::unique_ptr<ios::db::ProfileStore> store = ios::db::ProfileStore::Open(options.db_path, open);

  switch (options.command) {
    case Command::kDevices:
      Print(DevicesListing(*store), format, std::cout);
      break;
    case Command::kStats:
      Print(StatsListing(*store), format, std::cout);
      break;
    case Command::kSearches:
      Print(SearchesListing(*store, format), format, std::cout);
      break;
    case Command::kMeasurements: {
      size_t total = 0;
      const Listing listing = MeasurementsListing(*store, options.model, "",
                                                  static_cast<size_t>(options.limit), &total);
      Print(listing, format, std::cout);
      if (listing.rows.size() < total) {
        std::cerr << "(showing " << listing.rows.size() << " of " << total << " measurements)\n";
      }
      break;
    }
    case Command::kRuns:
      Print(RunsListing(*store, options.model), format, std::cout);
      break;
    case Command::kExport: {
      size_t total = 0;
      const Listing listing = MeasurementsListing(*store, "", options.device, 0, &total);
      if (!options.device.empty() && total == 0) {
        throw ios::Error("export: no measurements of a device named or fingerprinted '" +
                         options.device + "' in " + options.db_path + " (see ios-db devices)");
      }
      // The stage key is what makes a row reusable: always exported.
      if (options.output == "-") {
        // stdout carries the data alone; the summary goes to stderr.
        Print(listing, export_format, std::cout);
        std::cout.flush();
        if (!std::cout) throw ios::Error("failed writing the export to stdout");
        std::cerr << "exported " << total << " measurements to stdout\n";
        break;
      }
      std::ofstream out(options.output, std::ios::binary | std::ios::trunc);
      if (!out) throw ios::Error("cannot write " + options.output);
      Print(listing, export_format, out);
      out.close();
      if (!out) throw ios::Error("failed writing " + options.output);
      std::cout << "exported " << total << " measurements to " << options.output << '\n';
      break;
    }
    case Command::kImport:
      try {
        Import(options, *store);
      } catch (const std::exception&) {
        if (open.mode == ios::db::OpenMode::kCreate) {
          // Created for this import, which failed: leave no empty DB behind.
          store.reset();
          for (const char* suffix : {"", "-wal", "-shm"}) {
            std::filesystem::remove(options.db_path + suffix, error);
          }
        }
        throw;
      }
      break;
    case Command::kForget:
      Forget(options, *store);
      break;
    case Command::kReport:
      Report(options, *store);
      break;
  }
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  CLI::App app{
      "Query the ios-farm profiling DB: devices, stats, searches, measurements,\n"
      "end-to-end runs, and export of all measurements as CSV or JSON (queries\n"
      "open the file read-only); import another farm's measurements; forget\n"
      "failures or measurements. Rows from simulated devices are marked\n"
      "\"simulated\".",
      "ios-db"};
  app.fallthrough();  // --db/--format may also follow the command
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("ios-db ") + IOS_FARM_VERSION);
  app.add_option("--db", options.db_path, "Profiling DB file (must exist; import creates it)")
      ->required();
  CLI::Option* format_option =
      app.add_option("--format", options.format_name, "Output format: table (default), csv, json")
          ->check(CLI::IsMember({"table", "csv", "json"}));

  CLI::App* devices = app.add_subcommand("devices", "Devices and how many measurements each has");
  CLI::App* stats = app.add_subcommand(
      "stats", "Counts of devices, stages, measurements, searches, end-to-end runs");
  CLI::App* searches = app.add_subcommand("searches", "Finished searches, oldest first");
  CLI::App* measurements =
      app.add_subcommand("measurements", "Stored stage measurements, optionally of one model");
  measurements->add_option("--model", options.model, "Only the stages this model uses");
  // CLI11's PositiveNumber reports a range up to 1.8e308 for "0".
  const CLI::Validator at_least_one_row(
      [](std::string& text) -> std::string {
        int value = 0;
        const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
        if (error != std::errc() || end != text.data() + text.size() || value < 1) {
          return "must be a whole number of rows, at least 1 (leave --limit out to show all), "
                 "not '" +
                 text + "'";
        }
        return {};
      },
      "N>=1");
  measurements->add_option("--limit", options.limit, "Show at most N rows (N >= 1)")
      ->check(at_least_one_row);
  CLI::App* runs = app.add_subcommand(
      "runs",
      "End-to-end figures of whole networks under schedules (the search's verification, "
      "ios-coordinator --evaluate), oldest first");
  runs->add_option("--model", options.model, "Only the runs of this model");
  CLI::App* export_command = app.add_subcommand(
      "export", "Write all measurements to a file (csv or json: --format or the file's extension)");
  export_command
      ->add_option("--output,-o", options.output, "File to write ('-': stdout, needs --format)")
      ->required();
  export_command->add_option("--device", options.device,
                             "Only this device's measurements (name or fingerprint)");
  CLI::App* import_command = app.add_subcommand(
      "import",
      "Add another farm's measurements (a JSON export) for the device and settings this DB's "
      "searches use (creating the DB if missing); rows of other devices or settings are refused "
      "unless --force; a file whose rows are all refused, or that has none, is an error");
  import_command->add_option("file", options.input, "JSON file written by ios-db export")
      ->required();
  import_command->add_option(
      "--device", options.device,
      "The receiving device: its fingerprint, or the name of a device this DB knows");
  import_command->add_option("--settings", options.settings,
                             "The measurement settings key rows must have (e.g. "
                             "w2-n6-r6-max30-spread5%-float32; ios-coordinator prints it)");
  import_command->add_flag("--force", options.force,
                           "Take every row, each under its own device and settings");
  CLI::App* forget = app.add_subcommand(
      "forget",
      "Drop stored failures (--failures) or measurements (--measurements, with --device, "
      "--model or --all), and the end-to-end figures the same filters select, so that the next "
      "search measures them again");
  forget->add_flag("--failures", options.forget_failures, "Drop failed measurements");
  forget->add_flag("--measurements", options.forget_measurements,
                   "Drop every measurement, good or failed (needs --device, --model or --all)");
  std::vector<std::string> kind_names = {kTransientKinds};
  for (ios::MeasureError error : FailureKinds()) kind_names.push_back(ios::ToString(error));
  forget
      ->add_option("--kind", options.forget_kinds,
                   "With --failures: only failures of this kind (repeatable); 'transient' is "
                   "timeout and backend_failure")
      ->check(CLI::IsMember(kind_names));
  forget->add_option("--device", options.forget_device, "Only this device (name or fingerprint)");
  forget->add_option("--model", options.forget_model, "Only the stages this model uses");
  forget->add_flag("--all", options.forget_all, "With --measurements: drop them all");
  forget->add_flag("--runs-only", options.forget_runs_only,
                   "Drop only end-to-end figures (ios-db runs), no stage measurements");
  forget->add_flag("--keep-runs", options.forget_keep_runs,
                   "Drop only stage measurements, keeping end-to-end figures");

  CLI::App* report = app.add_subcommand(
      "report",
      "Write the HTML report of a recorded search (the latest that matches): its timeline, "
      "graph, schedules compared and search facts; a search recorded before schema 5 gives a "
      "partial report that says what is missing");
  CLI::Option* search_option =
      report->add_option("--search", options.report.id, "The search's id (ios-db searches)")
          ->check(CLI::PositiveNumber);
  CLI::Option* model_option =
      report->add_option("--model", options.report.model, "The latest search of this model")
          ->excludes(search_option);
  report->add_option("--batch", options.report.batch, "With --model: at this batch size")
      ->needs(model_option)
      ->check(CLI::PositiveNumber);
  report
      ->add_option("--device", options.report.device,
                   "With --model: on this device (name or fingerprint)")
      ->needs(model_option);
  report->add_option("--output,-o", options.output, "The HTML file to write")->required();

  try {
    app.parse(argc, argv);
    if (report->parsed() && search_option->count() == 0 && model_option->count() == 0) {
      throw CLI::ValidationError("report", "name the search: --search ID or --model M");
    }
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help
    std::cerr << "ios-db: " << e.what() << " (see ios-db --help)\n";
    return 2;
  }
  options.format_given = format_option->count() > 0;
  if (devices->parsed()) options.command = Command::kDevices;
  if (stats->parsed()) options.command = Command::kStats;
  if (searches->parsed()) options.command = Command::kSearches;
  if (measurements->parsed()) options.command = Command::kMeasurements;
  if (runs->parsed()) options.command = Command::kRuns;
  if (export_command->parsed()) options.command = Command::kExport;
  if (import_command->parsed()) options.command = Command::kImport;
  if (forget->parsed()) options.command = Command::kForget;
  if (report->parsed()) options.command = Command::kReport;

  try {
    Run(options);
    return 0;
  } catch (const BadArgument& e) {
    std::cerr << "ios-db: " << e.what() << '\n';
    return 2;
  } catch (const ios::db::NoSuchSearch& e) {
    std::cerr << "ios-db: " << e.what() << '\n';
    return 2;
  } catch (const ios::Error& e) {
    std::cerr << "ios-db: " << e.what() << '\n';
  } catch (const std::exception& e) {
    std::cerr << "ios-db: unexpected error: " << e.what() << '\n';
  }
  return 1;
}
