// HIOS on the fixture instances (shared/fixtures/hios-sim): latency of
// HIOS-LP and HIOS-MR (mapping only and after the window) under THE
// evaluator, and the scheduling time per instance (median of --repeat).
// Results are recorded in docs/benchmarks.md; the reference's own time
// comes from bench/hios_ref_time.py in the same run.
//
//   hios_bench [--repeat N] PATH...   PATH: an instance file, or a folder of
//   them (the unpacked hios-instances, with its upstream_failed/ inside)
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "bench/bench_util.h"
#include "common/error.h"
#include "hios/hios.h"
#include "hios/sim_instance.h"

namespace {

using ios::hios::HiosOptions;
using ios::hios::HiosResult;
using ios::hios::Mapper;
using ios::hios::SimInstance;

struct Row {
  double mapped_ms = 0, final_ms = 0, seconds = 0;
  int one_device = 0;
};

void AddInstances(const std::string& path, std::vector<std::string>& paths) {
  if (!std::filesystem::is_directory(path)) {
    paths.push_back(path);
    return;
  }
  for (const std::string& sub : {path, path + "/upstream_failed"}) {
    if (!std::filesystem::is_directory(sub)) continue;
    for (const auto& entry : std::filesystem::directory_iterator(sub)) {
      if (entry.path().extension() == ".json") paths.push_back(entry.path().string());
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  int repeat = 5;
  std::vector<std::string> paths;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--repeat" && i + 1 < argc) {
      repeat = std::max(1, std::atoi(argv[++i]));
    } else if (arg.starts_with("-")) {
      std::fprintf(stderr, "usage: hios_bench [--repeat N] INSTANCE.json|DIR...\n");
      return arg == "--help" ? 0 : 2;
    } else {
      AddInstances(arg, paths);
    }
  }
  if (paths.empty()) {
    std::fprintf(stderr, "usage: hios_bench [--repeat N] INSTANCE.json|DIR...\n");
    return 2;
  }
  std::sort(paths.begin(), paths.end());
  try {
    // [mapper][completed by the reference?]
    Row sum[2][2];
    int count[2] = {0, 0};
    double seq[2] = {0, 0}, ios_sum = 0;
    std::vector<double> lp_seconds;
    for (const std::string& path : paths) {
      const SimInstance sim = ios::hios::LoadSimInstance(path);
      const int completed = sim.upstream_error.empty() ? 1 : 0;
      ++count[completed];
      double sequential = 0;
      for (double t : sim.op_ms) sequential += t;
      seq[completed] += sequential;
      if (completed) ios_sum += *sim.upstream->ios;
      for (Mapper mapper : {Mapper::kLp, Mapper::kMr}) {
        HiosOptions options;
        options.mapper = mapper;
        options.window = {sim.window_size, sim.max_streams};
        std::vector<double> seconds;
        HiosResult result;
        for (int r = 0; r < repeat; ++r) {
          const auto start = ios::bench::Clock::now();
          result = ios::hios::Schedule(sim.dag, *sim.costs, options);
          seconds.push_back(ios::bench::Seconds(start));
        }
        Row& row = sum[mapper == Mapper::kLp ? 0 : 1][completed];
        row.mapped_ms += result.mapped_ms;
        row.final_ms += result.final_ms;
        row.seconds += ios::bench::Median(seconds);
        row.one_device += result.one_device_won ? 1 : 0;
        if (mapper == Mapper::kLp && completed) lp_seconds.push_back(ios::bench::Median(seconds));
      }
    }
    std::printf("instances: %d completed by the reference, %d not; median of %d runs each\n",
                count[1], count[0], repeat);
    for (int completed : {1, 0}) {
      const int n = count[completed];
      if (n == 0) continue;
      std::printf("\n%s (%d): sequential %.2f ms mean%s\n",
                  completed ? "completed" : "upstream failed", n, seq[completed] / n,
                  completed ? "" : " (no IOS figure)");
      if (completed) std::printf("  single-GPU IOS (reference) %.2f ms mean\n", ios_sum / n);
      std::printf("  %-6s %10s %10s %8s %8s %12s %10s\n", "", "mapped ms", "final ms", "x seq",
                  "x IOS", "s/instance", "1-device");
      for (int m : {0, 1}) {
        const Row& row = sum[m][completed];
        std::printf("  %-6s %10.2f %10.2f %8.3f %8s %12.5f %10d\n", m == 0 ? "HIOS-LP" : "HIOS-MR",
                    row.mapped_ms / n, row.final_ms / n, seq[completed] / row.final_ms,
                    completed ? std::to_string(ios_sum / row.final_ms).substr(0, 5).c_str() : "-",
                    row.seconds / n, row.one_device);
      }
    }
    if (!lp_seconds.empty()) {
      std::printf(
          "\nHIOS-LP scheduling time over the completed: mean %.5f s, median %.5f s, max %.5f s\n",
          sum[0][1].seconds / count[1], ios::bench::Median(lp_seconds),
          *std::max_element(lp_seconds.begin(), lp_seconds.end()));
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "hios_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
