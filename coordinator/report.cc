#include "coordinator/report.h"

#include <cmath>
#include <cstdio>
#include <set>
#include <sstream>
#include <tuple>
#include <vector>

#include "common/printable.h"

namespace ios::coordinator {

namespace {

std::string Format(const char* fmt, auto... args) {
  char buffer[512];
  std::snprintf(buffer, sizeof buffer, fmt, args...);
  return buffer;
}

std::string Ms(double ms) { return std::isfinite(ms) ? Format("%.3f ms", ms) : "failed"; }

// Bytes as a person reads them: 1024-based, three significant digits.
std::string Bytes(int64_t bytes) {
  if (bytes < 0) return "-";
  const double b = static_cast<double>(bytes);
  if (b < 1024) return Format("%lld B", static_cast<long long>(bytes));
  if (b < 1024.0 * 1024) return Format("%.1f KiB", b / 1024);
  if (b < 1024.0 * 1024 * 1024) return Format("%.2f MiB", b / (1024.0 * 1024));
  return Format("%.2f GiB", b / (1024.0 * 1024 * 1024));
}

}  // namespace

std::string FormatReport(const Graph& graph, const SearchOutcome& o) {
  std::ostringstream out;
  const char* label = o.device.simulated ? " (SIMULATED: analytical model, not a measurement)" : "";
  out << "model " << Printable(o.model) << ", " << graph.OperatorCount() << " operators in "
      << graph.blocks.size() << " blocks; device " << o.device.name << label << "; batch "
      << o.options.batch_size << "; strategy " << ToString(o.options.dp.strategies)
      << ", r=" << o.options.dp.max_group_size << " s=" << o.options.dp.max_groups << "\n\n";
  // A stage shared by several parts is counted where it first appears;
  // later parts list it under "earlier".
  // "dp": exact (the DP over the whole part), cut (the DP over a part of a
  // block cut by --max-part-size), or, for the pieces of a part over a DP
  // budget (numbered part.piece), split or greedy.
  out << Format("%5s %5s %4s %3s %9s %12s %10s %7s %8s %7s %7s  %s\n", "block", "part", "n", "d",
                "states", "transitions", "schedules", "stages", "measured", "from-db", "earlier",
                "dp");
  std::set<std::tuple<int, int, int>> used;  // block, part, piece in the IOS schedule
  for (const PartSummary& p : o.ios.parts) used.emplace(p.block, p.part, p.piece);
  std::vector<bool> seen(o.plan.stage_count(), false);
  for (const PartPlan& p : o.plan.parts) {
    const std::set<int> ids(p.stage_ids.begin(), p.stage_ids.end());
    int measured = 0, from_db = 0, earlier = 0;
    for (int id : ids) {
      if (seen[id]) {
        ++earlier;
      } else if (o.table.measured_now[id]) {
        ++measured;
      } else {
        ++from_db;
      }
      seen[id] = true;
    }
    // A part over budget: its pieces p.0, p.1, ... and p.all, the greedy
    // schedule of the whole part; "(unused)" marks what lost.
    const bool whole = p.schedule == PartSchedule::kExact || p.schedule == PartSchedule::kCut;
    const std::string part = whole ? std::to_string(p.part)
                             : p.alternative
                                 ? std::to_string(p.part) + ".all"
                                 : std::to_string(p.part) + "." + std::to_string(p.piece);
    const bool unused = !o.ios.parts.empty() && !used.count({p.block, p.part, p.piece});
    out << Format(
        "%5d %5s %4d %3d %9lld %12lld %10.3g %7zu %8d %7d %7d  %s%s\n", p.block, part.c_str(),
        p.space.operator_count(), p.space.width(), static_cast<long long>(p.space.state_count()),
        static_cast<long long>(p.space.transition_count()), p.space.schedule_count(), ids.size(),
        measured, from_db, earlier, ToString(p.schedule), unused ? " (unused)" : "");
  }
  for (const PartSummary& p : o.ios.parts) {
    if (p.part < 0) {
      out << "block " << p.block << ": its greedy schedule is faster than its approximated parts "
          << "and is used instead\n";
    }
  }
  if (!o.plan.warnings.empty()) {
    out << "\nAPPROXIMATE: " << o.plan.warnings.size()
        << " block(s) cut by --max-part-size or part(s) over a DP budget (dp = cut, split or "
           "greedy above); the IOS schedule is optimal only within each part or piece. Raise "
           "--max-part-size, --max-dp-states, --max-dp-transitions or --max-dp-stages to search "
           "more.\n";
  }
  const MeasureProgress& s = o.table.stats;
  out << "\ndistinct stages " << o.plan.stage_count() << " (" << o.plan.stage_occurrences
      << " counted per part); measured " << s.measured << ", reused from DB " << s.reused
      << ", failed " << s.failed << "\n";
  if (s.measured == 0) out << "nothing measured: every stage came from the profiling DB\n";
  if (s.lazy) {
    out << "lazy: " << s.bound_violations << " stage(s) came in below their lower bounds, "
        << s.parts_measured_in_full << " part(s) measured in full for it\n";
  }
  out << Format("time: enumerate %.3f s, measure %.3f s, solve %.3f s\n\n", o.enumerate_s,
                o.measure_s, o.solve_s);
  const double ios = o.ios.latency_ms;
  out << Format("%-11s %14s %9s %7s %12s\n", "schedule", "latency", "speedup", "stages",
                "peak memory");
  auto row = [&](const char* name, const Schedule& sch) {
    if (std::isnan(sch.latency_ms)) return;  // not asked for (--no-baselines)
    size_t stages = 0;
    for (const auto& b : sch.blocks) stages += b.size();
    const std::string speedup =
        std::isfinite(sch.latency_ms) && ios > 0 ? Format("%.2fx", sch.latency_ms / ios) : "-";
    out << Format("%-11s %14s %9s %7zu %12s\n", name, Ms(sch.latency_ms).c_str(), speedup.c_str(),
                  stages, Bytes(sch.peak_bytes).c_str());
  };
  row("sequential", o.sequential);
  row("greedy", o.greedy);
  row("ios", o.ios);
  out << "(speedup: that schedule's latency / the IOS schedule's; peak memory: activations live "
         "at once at batch "
      << o.options.batch_size << ", as ios-run plans them, weights excluded)";
  if (o.plan.memory.active) {
    const int batch = o.options.batch_size;
    out << Format(
        "\nmemory: ios is the fastest schedule with a peak of at most %s (%s); the "
        "least peak of any schedule of these parts is %s%s",
        Bytes(o.plan.memory.cap * batch).c_str(),
        o.options.memory.objective == MemoryOptions::Objective::kMemory ? "--objective memory"
                                                                        : "--memory-budget",
        Bytes(o.plan.memory.least_peak * batch).c_str(),
        o.plan.memory.least_exact ? "" : " or less (an order search fell back)");
  }
  if (o.device.simulated) out << "\nall latencies above are simulated";
  out << "\n";
  return out.str();
}

std::string FormatVerification(const SearchOutcome& o) {
  const Verification& v = o.verification;
  if (!v.ran()) return {};
  std::ostringstream out;
  out << "verified end to end on " << o.device.name
      << (o.device.simulated ? " (SIMULATED: the model's sum of its stages)" : "") << ", batch "
      << o.options.batch_size << " (" << o.options.verify.settings.Key() << "), "
      << Format("%.1f s", o.verify_s);
  if (v.passes_run < v.passes_planned) {
    out << ", " << v.passes_run << " of " << v.passes_planned << " passes (--verify-budget)";
  }
  out << ":\n";
  out << Format("  %-15s %6s %14s %14s %9s %10s\n", "schedule", "stages", "predicted ms",
                "measured ms", "spread", "meas/pred");
  for (size_t i = 0; i < v.candidates.size(); ++i) {
    const VerifiedSchedule& c = v.candidates[i];
    size_t stages = 0;
    for (const auto& block : c.schedule.blocks) stages += block.size();
    const MeasureResult& m = c.measured;
    std::string line =
        Format("  %-15s %6zu %14.3f ", c.name.c_str(), stages, c.schedule.latency_ms);
    if (m.ok()) {
      line += Format("%14.3f %9.3f %10.2f", m.median_ms, m.spread_ms,
                     m.median_ms / c.schedule.latency_ms);
    } else {
      line += Format("%14s %9s %10s", ToString(m.error), "-", "-");
    }
    if (c.reused) line += "  (from the DB)";
    if (i == v.chosen && m.ok()) line += "  <- returned";
    out << line << "\n";
  }
  if (!v.unverified_reason.empty()) {
    out << "returned: the DP's optimum, UNVERIFIED (no candidate ran end to end: "
        << v.unverified_reason << ")\n";
    return out.str();
  }
  const VerifiedSchedule& chosen = v.candidates[v.chosen];
  const VerifiedSchedule& ios = v.candidates.front();
  out << "returned: " << chosen.name << ", " << Format("%.3f ms", chosen.measured.median_ms)
      << " as measured";
  if (v.chosen != 0 && ios.measured.ok()) {
    out << Format(", %.1f%% faster than the DP's optimum as it runs (%.3f ms)",
                  100 * (1 - chosen.measured.median_ms / ios.measured.median_ms),
                  ios.measured.median_ms);
  } else if (v.chosen == 0) {
    out << ", the DP's optimum";
  }
  out << "\n";
  return out.str();
}

std::string FormatWorkers(const std::vector<WorkerReport>& workers) {
  if (workers.empty()) return "";
  std::string out =
      Format("\nworkers:\n  %-24s %-22s %-14s %9s %8s %7s %9s %6s\n", "worker", "address", "device",
             "answered", "networks", "failed", "requeued", "late");
  for (const WorkerReport& w : workers) {
    out += Format("  %-24s %-22s %-14s %9lld %8lld %7lld %9lld %6lld%s\n", w.worker_id.c_str(),
                  w.address.c_str(), w.device_name.c_str(), static_cast<long long>(w.answered),
                  static_cast<long long>(w.networks), static_cast<long long>(w.failed),
                  static_cast<long long>(w.requeued), static_cast<long long>(w.late),
                  !w.matches    ? "  (other device: not used)"
                  : w.connected ? ""
                                : "  (left)");
  }
  return out;
}

}  // namespace ios::coordinator
