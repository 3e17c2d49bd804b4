// Enumerate + solve wall time of a search, measurement excluded: for each zoo
// model, at r=3 s=8 and with no pruning, strategy both. Also the number of
// candidate stages counted per part (as the IOS reference does) and after
// cross-block deduplication by canonical key, and how many parts were
// planned by reusing an earlier part of the same structure, and a checksum
// of every distinct stage's key hash in id order (equal checksums across
// builds: the same stages, keys and ids).
//
//   build/bench/plan_bench [repeats [model]]   (default 5; prints medians; all zoo models)
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench/bench_util.h"
#include "common/zoo.h"
#include "coordinator/search.h"

namespace {

using namespace ios;
using namespace ios::coordinator;
using bench::Clock;
using bench::Median;
using bench::Seconds;

}  // namespace

int main(int argc, char** argv) {
  const int repeats = argc > 1 ? std::max(1, std::atoi(argv[1])) : 5;
  std::printf("%-13s %-8s %10s %10s %10s %12s %10s %12s %18s\n", "model", "pruning", "enumerate",
              "solve", "total", "per-part", "distinct", "reused parts", "keys checksum");
  // Optional: only this zoo model.
  const std::string only = argc > 2 ? argv[2] : "";
  for (const ZooEntry& model : ZooModels()) {
    if (!only.empty() && model.name != only) continue;
    const Graph graph = BuildZooModel(model.name);
    for (bool pruned : {true, false}) {
      SearchOptions options;
      if (!pruned) {
        options.dp.max_group_size = DpOptions::kMaxPartSize;
        options.dp.max_groups = DpOptions::kMaxPartSize;
      }
      std::vector<double> enumerate_s, solve_s, total_s;
      int64_t occurrences = 0;
      size_t distinct = 0;
      int reused = 0, parts = 0;
      uint64_t checksum = 0;
      for (int r = 0; r < repeats; ++r) {
        auto t = Clock::now();
        const SearchPlan plan = PlanSearch(graph, options);
        enumerate_s.push_back(Seconds(t));
        // Any latency table will do for timing the DP; make one up.
        std::vector<double> latency(plan.stage_count());
        for (size_t i = 0; i < latency.size(); ++i) latency[i] = 0.01 + (i * 7919 % 1000) * 1e-3;
        t = Clock::now();
        const Schedule schedule = SolveSchedule(plan, latency, graph.blocks.size());
        solve_s.push_back(Seconds(t));
        total_s.push_back(enumerate_s.back() + solve_s.back());
        occurrences = plan.stage_occurrences;
        distinct = plan.stage_count();
        reused = plan.reused_parts;
        parts = static_cast<int>(plan.parts.size());
        checksum = 0;
        for (const StageKeyHash& hash : plan.key_hashes) {
          checksum = (checksum ^ static_cast<uint64_t>(hash.id)) * 0x100000001b3ULL;
        }
        if (!(schedule.latency_ms > 0)) return 1;
      }
      std::printf("%-13s %-8s %9.3fs %9.3fs %9.3fs %12lld %10zu %6d of %3d   %016llx\n",
                  model.name.c_str(), pruned ? "r3-s8" : "none", Median(enumerate_s),
                  Median(solve_s), Median(total_s), static_cast<long long>(occurrences), distinct,
                  reused, parts, static_cast<unsigned long long>(checksum));
      std::fflush(stdout);
    }
  }
  return 0;
}
