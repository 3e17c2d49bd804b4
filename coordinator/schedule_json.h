// The schedule file ios-coordinator writes (--out) and reads (--evaluate).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/graph.h"
#include "common/measurement.h"
#include "common/stage.h"
#include "coordinator/search.h"

namespace ios::coordinator {

//! Everything the schedule file records besides the stages.
struct ScheduleInfo {
  std::string model;
  DeviceInfo device;
  int batch_size = 1;
  SearchOptions options;
  std::optional<double> sequential_ms, greedy_ms;
};

//! How a schedule's JSON is laid out: indented for a file people read,
//! compact for the profiling DB's search records (a third of the size).
enum class JsonLayout { kIndented, kCompact };

//! Serialises a schedule with its graph (IOS JSON) so the file is
//! self-contained: it can be priced later on another device or batch size.
std::string ScheduleToJson(const Graph& graph, const Schedule& schedule, const ScheduleInfo& info,
                           JsonLayout layout = JsonLayout::kIndented);

//! A schedule read back: the graph it schedules and its stages per block.
struct LoadedSchedule {
  Graph graph;
  std::vector<std::vector<Stage>> blocks;
  std::string origin;  // "ios-farm" or "ios-reference"
  //! The measurement settings of the search that wrote it (ios-farm files
  //! searched on a real device), so a prediction reuses its measurements.
  std::optional<MeasureSettings> settings;
};

//! Reads an ios-farm schedule file, or an IOS reference schedule (IOS JSON
//! with "stages" in every block). Checks that the stages cover every
//! operator of each block exactly once, in dependency order, and that merge
//! stages are mergeable. Throws ios::Error naming the file and the problem.
LoadedSchedule LoadSchedule(const std::string& path);

}  // namespace ios::coordinator
