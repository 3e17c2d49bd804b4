// The readable summary ios-coordinator prints after a search.
#pragma once

#include <string>
#include <vector>

#include "common/graph.h"
#include "coordinator/farm.h"
#include "coordinator/memory_front.h"
#include "coordinator/search.h"

namespace ios::coordinator {

//! Per part: operators, width, states, transitions, schedules, candidate
//! stages, measured now vs reused, and how it was solved (dp: exact, cut
//! for a part of a block cut by max_part_size, or split / greedy for a part
//! over a DP budget, then an APPROXIMATE line);
//! then the three latencies and speedups. A baseline whose latency is NaN
//! (not asked for) is left out; an infinite one (a stage failed) reads
//! "failed". Says "simulated" when the device is simulated.
std::string FormatReport(const Graph& graph, const SearchOutcome& outcome);

//! The schedules the search ran end to end (SearchOutcome::verification):
//! stages, the DP's prediction, the measured median and spread, their
//! ratio, which figures came from the DB, and which one is returned and
//! why. Empty when verification did not run. Says "simulated" when the
//! device is.
std::string FormatVerification(const SearchOutcome& outcome);

//! The latency/peak-memory front (ios-coordinator --memory-front): the
//! non-dominated points by increasing peak, each with what it was searched
//! under, its peak, latency, stages, slowdown and memory saving against
//! the unconstrained IOS schedule, stages measured and search time; the
//! sequential and greedy baselines for reference (left out when their
//! latency is NaN); how many points were dominated; the fastest schedule
//! that fits in the sequential schedule's peak. Says "simulated" when the
//! device is.
std::string FormatMemoryFront(const Graph& graph, const MemoryFront& front);

//! Bytes as a person reads them: 1024-based, three significant digits
//! ("58.61 MiB"); "-" when negative (not computed).
std::string FormatBytes(int64_t bytes);

//! "--memory-budget 40.00 MiB", "--objective memory", "unconstrained": what
//! one search of the front runs under.
std::string DescribeFrontSearch(MemoryFrontPoint::Kind kind, int64_t budget_bytes);

//! The workers' table (answered, failed, requeued, late per worker) that
//! follows the report; empty when there were none.
std::string FormatWorkers(const std::vector<WorkerReport>& workers);

}  // namespace ios::coordinator
