// The farm as users run it, shared by farm_process_test.cc (searches,
// workers and coordinators killed, stopped and refused) and
// farm_curve_process_test.cc (CURVE and docs/security.md): a fixture that
// starts real ios-coordinator and ios-worker processes, and readers of what
// they report and store.
#pragma once

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/testing/binaries.h"
#include "tests/testing/child.h"
#include "tests/testing/process.h"

namespace ios::farm_process_testing {

using ::ios::testing::kCoordinator;
using ::ios::testing::kIosDb;
using ::ios::testing::kKeygen;
using ::ios::testing::kWorker;

namespace fs = std::filesystem;
using nlohmann::json;
using std::chrono_literals::operator""ms;
using std::chrono_literals::operator""s;
using ::ios::testing::ChildProcess;
using ::ios::testing::ReadFile;
using ::ios::testing::ShellQuote;
using ::ios::testing::WaitForText;
using ::testing::HasSubstr;
using ::testing::Not;

// How long a search in these tests may take before the test gives up on it
// (they take seconds; this only bounds a hang).
constexpr auto kSearchLimit = 60s;
// The heartbeat of the tests that lose a worker on purpose: one is declared
// lost after 3 silent periods. Others keep the default (1 s), so that a
// loaded machine that stalls a healthy process for a moment fails nothing.
constexpr const char* kFastHeartbeatMs = "200";

// One row of the coordinator's "workers:" table.
struct WorkerRow {
  std::string id, address, device;
  long long answered = -1, networks = -1, failed = -1, requeued = -1, late = -1;
  std::string marker;  // "", "(left)" or "(other device: not used)"
};

inline std::vector<WorkerRow> ParseWorkersTable(const std::string& report) {
  std::vector<WorkerRow> rows;
  const size_t start = report.find("\nworkers:\n");
  if (start == std::string::npos) return rows;
  std::istringstream in(report.substr(start + 10));
  std::string line;
  std::getline(in, line);  // header
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    WorkerRow row;
    if (!(fields >> row.id >> row.address >> row.device >> row.answered >> row.networks >>
          row.failed >> row.requeued >> row.late)) {
      break;
    }
    std::getline(fields, row.marker);
    row.marker.erase(0, row.marker.find_first_not_of(' '));
    rows.push_back(row);
  }
  return rows;
}

inline const WorkerRow* FindRow(const std::vector<WorkerRow>& rows, const std::string& id) {
  for (const WorkerRow& row : rows) {
    if (row.id == id) return &row;
  }
  return nullptr;
}

// Every row of worker `id`: a worker that reconnects (says hello again) gets
// a row per connection.
inline std::vector<WorkerRow> RowsOf(const std::vector<WorkerRow>& rows, const std::string& id) {
  std::vector<WorkerRow> found;
  for (const WorkerRow& row : rows) {
    if (row.id == id) found.push_back(row);
  }
  return found;
}

inline long long TotalAnswered(const std::vector<WorkerRow>& rows) {
  long long total = 0;
  for (const WorkerRow& row : rows) total += row.answered;
  return total;
}

// RFC 4180 records (quoted fields may hold commas, quotes and line breaks).
inline std::vector<std::vector<std::string>> ParseCsv(const std::string& text) {
  std::vector<std::vector<std::string>> records;
  std::vector<std::string> record;
  std::string field;
  bool quoted = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quoted) {
      if (c == '"' && i + 1 < text.size() && text[i + 1] == '"') {
        field += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        field += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      record.push_back(std::move(field));
      field.clear();
    } else if (c == '\n') {
      record.push_back(std::move(field));
      field.clear();
      records.push_back(std::move(record));
      record.clear();
    } else if (c != '\r') {
      field += c;
    }
  }
  if (!field.empty() || !record.empty()) {
    record.push_back(std::move(field));
    records.push_back(std::move(record));
  }
  return records;
}

class FarmProcessTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_FALSE(dir_.path().empty()) << "no temp dir"; }

  fs::path Path(const std::string& name) const { return dir_.path() / name; }

  // A coordinator process: its report (stdout) and log (stderr) apart.
  struct Coordinator {
    std::unique_ptr<ChildProcess> process;
    fs::path out, log;
    std::string endpoint;  // resolved, when it binds one
    std::string Report() const { return ReadFile(out); }
    std::string Log() const { return ReadFile(log); }
  };

  // Starts `ios-coordinator --db DB ARGS`; with --bind, waits (bounded) for
  // the endpoint it resolved.
  Coordinator StartCoordinator(const std::string& name, const std::string& db,
                               const std::vector<std::string>& args) {
    Coordinator c;
    c.out = Path(name + ".out");
    c.log = Path(name + ".log");
    std::vector<std::string> argv = {kCoordinator, "--db", Path(db).string()};
    if (std::find(args.begin(), args.end(), "--device") == args.end()) {
      argv.insert(argv.end(), {"--device", "sim:v100"});
    }
    // These tests count what is measured and stored: every stage.
    if (std::find(args.begin(), args.end(), "--measure") == args.end()) {
      argv.insert(argv.end(), {"--measure", "all"});
    }
    argv.insert(argv.end(), args.begin(), args.end());
    c.process = std::make_unique<ChildProcess>(argv, c.out, c.log);
    EXPECT_TRUE(c.process->started()) << kCoordinator;
    if (std::find(args.begin(), args.end(), "--bind") != args.end()) {
      const auto log = WaitForText(c.log, "listening for workers on ", 15s);
      EXPECT_TRUE(log.has_value()) << "the coordinator never said where it listens:\n"
                                   << ReadFile(c.log);
      if (log) {
        std::smatch match;
        if (std::regex_search(*log, match, std::regex("listening for workers on (\\S+)"))) {
          c.endpoint = match[1].str();
        }
      }
      EXPECT_THAT(c.endpoint, ::testing::StartsWith("tcp://127.0.0.1:"));
      EXPECT_THAT(c.endpoint, Not(HasSubstr("*")));
    }
    return c;
  }

  // Starts `ios-worker --connect ENDPOINT --id ID ARGS`, logging to ID.log.
  std::unique_ptr<ChildProcess> StartWorker(const std::string& id, const std::string& endpoint,
                                            const std::vector<std::string>& args = {}) {
    std::vector<std::string> argv = {kWorker, "--connect", endpoint, "--id", id};
    if (fast_heartbeat_) {
      argv.push_back("--heartbeat-ms");
      argv.push_back(kFastHeartbeatMs);
    }
    argv.insert(argv.end(), args.begin(), args.end());
    if (std::find(args.begin(), args.end(), "--backend") == args.end()) {
      argv.insert(argv.end(), {"--backend", "sim:v100"});  // the default is this machine's cpu
    }
    auto worker = std::make_unique<ChildProcess>(argv, Path(id + ".log"));
    EXPECT_TRUE(worker->started()) << kWorker;
    return worker;
  }

  // The exit code of a process expected to end on its own within `limit`.
  static int WaitExit(ChildProcess& process, std::chrono::milliseconds limit) {
    const std::optional<int> code = process.Wait(limit);
    EXPECT_TRUE(code.has_value()) << "still running after " << limit.count() << " ms";
    return code.value_or(-1);
  }

  // Stops a worker the way an operator does and expects a clean exit.
  static void StopWorker(ChildProcess& worker) {
    worker.Signal(SIGTERM);
    EXPECT_EQ(WaitExit(worker, 10s), 0) << "ios-worker should exit 0 on SIGTERM";
  }

  testing::CliResult Run(const std::string& binary, const std::string& args, int timeout_s = 90) {
    testing::CliResult result = testing::RunBinary(dir_.path(), binary, args, timeout_s);
    EXPECT_NE(result.exit_code, 124) << "timed out: " << binary << " " << args;
    return result;
  }

  // `ios-db --db DB COMMAND --format json`, parsed; null when the DB is
  // not there (yet) or the command fails.
  json DbJson(const std::string& db, const std::string& command) {
    const testing::CliResult r = testing::RunBinary(
        dir_.path(), kIosDb,
        "--db " + ShellQuote(Path(db).string()) + " " + command + " --format json", 30);
    if (r.exit_code != 0) return nullptr;
    return json::parse(r.out, nullptr, /*allow_exceptions=*/false);
  }

  // stats: a count ("measurements", "stages", ...), or -1.
  long long Stat(const std::string& db, const std::string& name) {
    const json stats = DbJson(db, "stats");
    if (!stats.is_array() || stats.empty() || !stats[0].contains(name)) return -1;
    return stats[0][name].get<long long>();
  }

  json Searches(const std::string& db) {
    const json searches = DbJson(db, "searches");
    EXPECT_TRUE(searches.is_array()) << "ios-db searches failed on " << db;
    return searches.is_array() ? searches : json::array();
  }

  // Polls `ios-db stats` until at least `count` measurements are stored,
  // bounded; the stored count then.
  long long WaitForMeasurements(const std::string& db, long long count) {
    const auto deadline = std::chrono::steady_clock::now() + 30s;
    long long stored = -1;
    while (std::chrono::steady_clock::now() < deadline) {
      stored = Stat(db, "measurements");
      if (stored >= count) break;
      std::this_thread::sleep_for(30ms);
    }
    EXPECT_GE(stored, count) << "the DB never got " << count << " measurements";
    return stored;
  }

  // `ios-db measurements --format csv` without the measured_at column,
  // as sorted records (each joined by '\x1f'); the header first.
  std::vector<std::string> MeasurementsWithoutTime(const std::string& db) {
    const testing::CliResult r =
        Run(kIosDb, "--db " + ShellQuote(Path(db).string()) + " measurements --format csv", 60);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    std::vector<std::vector<std::string>> records = ParseCsv(r.out);
    EXPECT_FALSE(records.empty());
    if (records.empty()) return {};
    const auto& header = records.front();
    const auto time_column = std::find(header.begin(), header.end(), "measured_at");
    EXPECT_NE(time_column, header.end()) << "no measured_at column";
    const size_t drop = static_cast<size_t>(time_column - header.begin());
    std::vector<std::string> lines;
    for (auto& record : records) {
      EXPECT_EQ(record.size(), header.size());
      std::string line;
      for (size_t i = 0; i < record.size(); ++i) {
        if (i != drop) line += record[i] + '\x1f';
      }
      lines.push_back(std::move(line));
    }
    std::sort(lines.begin() + 1, lines.end());
    return lines;
  }

  // A reference search on a fresh DB with one embedded worker and no delay.
  void ReferenceSearch(const std::string& model, const std::string& db, const std::string& out) {
    const testing::CliResult r =
        Run(kCoordinator, "--model " + model + " --db " + ShellQuote(Path(db).string()) +
                              " --out " + ShellQuote(Path(out).string()) +
                              " --local-workers 1 --quiet --device sim:v100 --measure all");
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }

  // Everything a remote-worker coordinator needs in these tests.
  std::vector<std::string> CurveCoordinatorArgs(const std::vector<std::string>& workers,
                                                const std::string& allowed);

  std::vector<std::string> BindArgs(const std::string& model, int min_workers,
                                    const std::string& out = "") const {
    std::vector<std::string> args = {"--model",       model,
                                     "--bind",        "tcp://127.0.0.1:*",
                                     "--min-workers", std::to_string(min_workers),
                                     "--quiet"};
    if (fast_heartbeat_) {
      args.push_back("--heartbeat-ms");
      args.push_back(kFastHeartbeatMs);
    }
    if (!out.empty()) {
      args.push_back("--out");
      args.push_back(out);
    }
    return args;
  }

  // Whether coordinators and workers started from now on use kFastHeartbeatMs.
  bool fast_heartbeat_ = false;
  testing::TempDir dir_{"ios_farm_process"};
};

}  // namespace ios::farm_process_testing
