// Internal to ios-coordinator: its command line (coordinator_main.cc), the
// farm it starts (cli_farm.cc) and what it runs (cli_commands.cc).
#pragma once

#include <cstdio>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "coordinator/farm.h"
#include "coordinator/multi_device.h"
#include "coordinator/schedule_json.h"
#include "coordinator/search.h"
#include "db/profile_store.h"
#include "report/report.h"

namespace ios::coordinator::cli {

//! The measurement options given on the command line; the rest come from
//! each device's defaults (a --specialize run has several devices).
struct MeasureOverrides {
  std::optional<int> warmup, number, repeat, max_repeat;
  std::optional<double> max_spread;  // a fraction
};
//! DefaultMeasureSettings(timing) with `given` applied.
MeasureSettings MeasureSettingsFor(DeviceTiming timing, const MeasureOverrides& given);

struct CliOptions {
  std::string model;
  std::string evaluate;
  bool list_models = false;
  std::string device = "cpu";
  std::string strategy = "both";
  std::string measure = "lazy";
  std::string blocks = "model";  // or "auto": found here, the model's ignored
  bool no_pruning = false;
  std::string memory_budget;          // --memory-budget as given (ParseByteSize)
  std::string objective = "latency";  // --objective
  int memory_front = 0;               // --memory-front N: searched points; 0: no front
  std::string db = "ios-farm.db";
  std::string out;
  std::string report;  // --report FILE.html: the search's or evaluation's HTML report
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
  //! --devices with more than one device: a HIOS schedule over them too.
  int device_count = 1;
  MultiDeviceOptions multi;
  //! --force-devices: write HIOS's schedule even where one device's is faster.
  bool force_devices = false;
  //! --link measure: multi.link from the farm (a worker owning two of the
  //! devices) or the DB, under link_query (coordinator/measured_link.h).
  bool measure_link = false;
  LinkQuery link_query = LinkQuery::Default();
  //! --specialize (cli_specialize.cc): every (batch, device) searched and
  //! each schedule priced at every other. `batches` is --batch as a list
  //! (search.batch_size its first), `devices` every --device (`device` the
  //! first), `format` --format as given ("" when not).
  bool specialize = false;
  std::vector<int> batches{1};
  std::vector<std::string> devices{"cpu"};
  std::string format;
  MeasureOverrides measure_given;
};

//! What is wrong with --device or --bind, before anything is opened or
//! started; empty when nothing is.
std::string FarmOptionProblem(const CliOptions& cli);

//! Why the schedule could not be written to `path`, or "" when it can.
std::string OutputProblem(const std::string& path);

//! A search (--model) and the pricing of a given schedule (--evaluate):
//! the process's exit code.
int Search(CliOptions cli);
int Evaluate(CliOptions cli);
//! The latency/peak-memory front (--memory-front): its searches, its
//! table, and --out's schedule (the unconstrained search's, or with
//! --memory-budget or --objective memory, that search's).
int SearchFront(CliOptions cli);

//! The time now, ISO 8601 in UTC (a report's and a search record's stamp).
std::string NowUtc();
//! --report: `input` stamped with `tool`, the version and the time, drawn
//! and written to `path` (checked before any work by ReportPathProblem);
//! "report written to PATH" on `said_on` (stderr where stdout carries a
//! schedule or a matrix).
void WriteReportFile(const std::string& path, report::ReportInput input, const std::string& tool,
                     std::FILE* said_on);
//! The profiling DB's record of a search of `cli`'s options that returned
//! `returned` (`cli.search` the options it searched with).
db::SearchRecord RecordOf(const CliOptions& cli, const Graph& graph, const SearchOutcome& outcome,
                          const Schedule& returned, const ScheduleInfo& info,
                          const std::string& started_at);

//! --model's graph (a zoo name, an IOS JSON or ONNX file; shapes inferred)
//! and name, with its blocks found here under --blocks auto.
std::pair<Graph, std::string> ResolveModel(const CliOptions& cli);

//! --batch's value: one batch size, or with --specialize a comma list.
//! Throws ios::Error saying which entry is wrong and why.
std::vector<int> ParseBatchList(const std::string& text);
//! What is wrong with --specialize and the options beside it (or with a
//! list of batches or devices without it), in one line; "" when nothing.
std::string SpecializeOptionProblem(const CliOptions& cli, bool devices_given);
//! --specialize: the matrix on stdout (text, CSV or JSON), progress on stderr.
int Specialize(CliOptions cli);

}  // namespace ios::coordinator::cli
