// Internal to ios-coordinator: its command line (coordinator_main.cc), the
// farm it starts (cli_farm.cc) and what it runs (cli_commands.cc).
#pragma once

#include <string>
#include <vector>

#include "coordinator/farm.h"
#include "coordinator/multi_device.h"
#include "coordinator/search.h"

namespace ios::coordinator::cli {

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

}  // namespace ios::coordinator::cli
