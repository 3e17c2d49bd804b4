// ios-run's memory figures: the memory model's peak of a schedule, the
// least-peak order's report, and --rewrite memory (kept apart from
// run_main.cc, which prints them).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "common/graph.h"
#include "common/stage.h"
#include "memory/network_order.h"
#include "memory/rewrite.h"
#include "run/network_run.h"

namespace ios::run {

//! memory/'s peak of the stages at `batch` (each stage's operators counted
//! apart): the plan's live peak for every schedule without merge stages.
int64_t ModelPeak(const Graph& graph, const std::vector<Stage>& stages, int batch);

//! The schedule ios-run names `name` (sequential, greedy or memory) of
//! `graph`; for memory, `order` gets the least-peak order's search.
NetworkSchedule NamedSchedule(const Graph& graph, const std::string& name, int batch,
                              std::optional<memory::NetworkOrder>* order);

//! "; least-peak order, 0.012 s; Kahn order 2.30 MiB" for the model peak's
//! line, or "" without an order.
std::string MemoryOrderNote(const std::optional<memory::NetworkOrder>& order);
nlohmann::json MemoryOrderJson(const std::optional<memory::NetworkOrder>& order);

//! --rewrite memory: the model rewritten where the least-peak order's
//! per-part peaks drop (memory::RewriteForMemory judged by
//! memory::LeastPeakRegionPeaks at the batch, ios-run's memory model), and
//! the original's figures under the same named schedule, to print beside
//! the rewritten run's.
struct MemoryRewriteRun {
  memory::MemoryRewrite rewrite;
  double seconds = 0;  // the rewriting search
  std::string schedule;
  int64_t original_model_peak = 0, original_live_peak = 0;  // at the batch
};
MemoryRewriteRun RewriteForMemory(const Graph& graph, const std::string& schedule, int batch);

//! One line per site tried (kept or rejected, with the peaks that decided)
//! and a summary line.
std::vector<std::string> RewriteLines(const MemoryRewriteRun& run);
//! "model peak 2.41 -> 2.41 MiB, live at peak 2.41 -> 2.41 MiB (...)": the
//! original under the same schedule, then the rewritten run's.
std::string RewritePeakLine(const MemoryRewriteRun& run, int64_t model_peak, int64_t live_peak);
nlohmann::json RewriteJson(const MemoryRewriteRun& run);

}  // namespace ios::run
