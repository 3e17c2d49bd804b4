#include "coordinator/report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>
#include <sstream>
#include <tuple>
#include <vector>

#include "common/printable.h"
#include "coordinator/report_input.h"

namespace ios::coordinator {

namespace {

std::string Format(const char* fmt, auto... args) {
  char buffer[512];
  std::snprintf(buffer, sizeof buffer, fmt, args...);
  return buffer;
}

std::string Ms(double ms) { return std::isfinite(ms) ? Format("%.3f ms", ms) : "failed"; }

std::string Bytes(int64_t bytes) { return FormatBytes(bytes); }

}  // namespace

std::string FormatBytes(int64_t bytes) {
  if (bytes < 0) return "-";
  const double b = static_cast<double>(bytes);
  if (b < 1024) return Format("%lld B", static_cast<long long>(bytes));
  if (b < 1024.0 * 1024) return Format("%.1f KiB", b / 1024);
  if (b < 1024.0 * 1024 * 1024) return Format("%.2f MiB", b / (1024.0 * 1024));
  return Format("%.2f GiB", b / (1024.0 * 1024 * 1024));
}

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
  // "skipped": never measured, because the lazy search's bounds showed it
  // cannot be on an optimal schedule (not stored in the DB either).
  out << Format("%5s %5s %4s %3s %9s %12s %10s %7s %8s %7s %7s %7s  %s\n", "block", "part", "n",
                "d", "states", "transitions", "schedules", "stages", "measured", "from-db",
                "skipped", "earlier", "dp");
  std::set<std::tuple<int, int, int>> used;  // block, part, piece in the IOS schedule
  for (const PartSummary& p : o.ios.parts) used.emplace(p.block, p.part, p.piece);
  const std::vector<PartStageCounts> counts = CountPartStages(o);
  for (size_t i = 0; i < o.plan.parts.size(); ++i) {
    const PartPlan& p = o.plan.parts[i];
    const PartStageCounts& c = counts[i];
    // A part over budget: its pieces p.0, p.1, ... and p.all, the greedy
    // schedule of the whole part; "(unused)" marks what lost.
    const bool whole = p.schedule == PartSchedule::kExact || p.schedule == PartSchedule::kCut;
    const std::string part = whole ? std::to_string(p.part)
                             : p.alternative
                                 ? std::to_string(p.part) + ".all"
                                 : std::to_string(p.part) + "." + std::to_string(p.piece);
    const bool unused = !o.ios.parts.empty() && !used.count({p.block, p.part, p.piece});
    out << Format("%5d %5s %4d %3d %9lld %12lld %10.3g %7lld %8lld %7lld %7lld %7lld  %s%s\n",
                  p.block, part.c_str(), p.space.operator_count(), p.space.width(),
                  static_cast<long long>(p.space.state_count()),
                  static_cast<long long>(p.space.transition_count()), p.space.schedule_count(),
                  static_cast<long long>(c.stages), static_cast<long long>(c.measured),
                  static_cast<long long>(c.stored), static_cast<long long>(c.skipped),
                  static_cast<long long>(c.earlier), ToString(p.schedule),
                  unused ? " (unused)" : "");
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
      << ", failed " << s.failed;
  if (s.lazy) {
    out << ", skipped by bounds "
        << std::count(o.table.skipped.begin(), o.table.skipped.end(), true);
  }
  out << "\n";
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

std::string DescribeFrontSearch(MemoryFrontPoint::Kind kind, int64_t budget_bytes) {
  switch (kind) {
    case MemoryFrontPoint::Kind::kLeastPeak:
      return "--objective memory";
    case MemoryFrontPoint::Kind::kUnconstrained:
      return "unconstrained";
    case MemoryFrontPoint::Kind::kBudget:
      return "--memory-budget " + Bytes(budget_bytes);
    case MemoryFrontPoint::Kind::kSequentialPeak:
      return "--memory-budget " + Bytes(budget_bytes) + " (the sequential schedule's peak)";
  }
  return "?";
}

std::string FormatMemoryFront(const Graph& graph, const MemoryFront& front) {
  const SearchOutcome& o = front.unconstrained;
  const double fastest = o.ios.latency_ms;
  const int64_t most = o.ios.peak_bytes;
  int64_t measured = 0;
  for (const MemoryFrontPoint& p : front.points) measured += p.measured;
  std::ostringstream out;
  out << "memory front of " << Printable(o.model) << " (" << graph.OperatorCount()
      << " operators) on " << o.device.name
      << (o.device.simulated ? " (SIMULATED: analytical model, not a measurement)" : "")
      << ", batch " << o.options.batch_size << ": " << front.points.size() << " searches ("
      << measured << " stages measured in all), " << front.DominatedCount()
      << " dominated (another is as fast with less memory or faster with as little, or the "
         "same as one listed) and left out\n";
  out << Format("  %-18s %12s %12s %7s %9s %7s %9s %8s\n", "searched under", "peak", "latency",
                "stages", "slowdown", "saving", "measured", "time");
  auto stages_of = [](const Schedule& s) {
    size_t n = 0;
    for (const auto& block : s.blocks) n += block.size();
    return n;
  };
  auto ratios = [&](const Schedule& s) {
    const std::string slowdown = std::isfinite(s.latency_ms) && fastest > 0
                                     ? Format("%.3fx", s.latency_ms / fastest)
                                     : std::string("-");
    const std::string saving =
        most > 0 ? Format("%.1f%%", 100.0 * (1 - static_cast<double>(s.peak_bytes) / most)) : "-";
    return std::pair(slowdown, saving);
  };
  for (const MemoryFrontPoint& p : front.points) {
    if (p.dominated) continue;
    const std::string under = p.kind == MemoryFrontPoint::Kind::kLeastPeak       ? "least peak"
                              : p.kind == MemoryFrontPoint::Kind::kUnconstrained ? "none"
                              : p.kind == MemoryFrontPoint::Kind::kSequentialPeak
                                  ? Bytes(p.budget_bytes) + " (seq)"
                                  : Bytes(p.budget_bytes);
    const auto [slowdown, saving] = ratios(p.schedule);
    out << Format("  %-18s %12s %12s %7zu %9s %7s %9lld %6.1f s\n", under.c_str(),
                  Bytes(p.schedule.peak_bytes).c_str(), Ms(p.schedule.latency_ms).c_str(),
                  stages_of(p.schedule), slowdown.c_str(), saving.c_str(),
                  static_cast<long long>(p.measured), p.search_s);
  }
  for (const auto& [name, s] : {std::pair("sequential", &o.sequential), {"greedy", &o.greedy}}) {
    if (std::isnan(s->latency_ms)) continue;  // not asked for (--no-baselines)
    if (name == std::string("sequential")) out << "  baselines, for reference:\n";
    const auto [slowdown, saving] = ratios(*s);
    out << Format("  %-18s %12s %12s %7zu %9s %7s\n", name, Bytes(s->peak_bytes).c_str(),
                  Ms(s->latency_ms).c_str(), stages_of(*s), slowdown.c_str(), saving.c_str());
  }
  for (const MemoryFrontPoint& p : front.points) {
    if (p.kind != MemoryFrontPoint::Kind::kLeastPeak) continue;
    out << Format("least peak %s at %s (%.3fx); unconstrained IOS %s at %s\n",
                  Bytes(p.schedule.peak_bytes).c_str(), Ms(p.schedule.latency_ms).c_str(),
                  p.schedule.latency_ms / fastest, Bytes(most).c_str(), Ms(fastest).c_str());
  }
  // The fastest schedule searched that fits where sequential does: the
  // search at that budget, or one below it that is as fast.
  const Schedule* fits = nullptr;
  for (const MemoryFrontPoint& p : front.points) {
    if (std::isnan(o.sequential.latency_ms)) break;
    if (p.schedule.peak_bytes > o.sequential.peak_bytes) continue;
    if (fits == nullptr || p.schedule.latency_ms < fits->latency_ms) fits = &p.schedule;
  }
  if (fits != nullptr) {
    out << Format(
        "at the sequential schedule's peak (%s): %s at %s, %.2fx faster than sequential (%s), "
        "%.3fx the unconstrained IOS latency\n",
        Bytes(o.sequential.peak_bytes).c_str(), Ms(fits->latency_ms).c_str(),
        Bytes(fits->peak_bytes).c_str(), o.sequential.latency_ms / fits->latency_ms,
        Ms(o.sequential.latency_ms).c_str(), fits->latency_ms / fastest);
  }
  out << "(peak: activations live at once in ios-run's memory plan at batch "
      << o.options.batch_size
      << ", weights excluded; latency: the DP's, the sum of the schedule's stage latencies; "
         "slowdown and saving: against the unconstrained IOS schedule; measured: stages that "
         "search measured, the rest came from the profiling DB)\n";
  if (!front.least_exact) {
    out << "least peak: an order search fell back, so it is the peak of a known order, an upper "
           "bound\n";
  }
  if (o.device.simulated) out << "all latencies above are simulated\n";
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
