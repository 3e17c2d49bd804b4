// Coordinator overhead per query: the same stages measured with zero delay
// (a) in-process, calling the sim backend directly (issue 2's path), and
// (b) through the farm with embedded workers over inproc:// (encode, route,
// decode, measuring thread, result back). (b) - (a) per stage is what the
// farm adds to each query. Optionally (c) through the whole measure phase
// with the profiling DB (group commits included), on a fresh :memory: DB.
//
//   build/bench/farm_bench [model] [repeats] [local workers]
//   defaults: nasnet 3 1
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench/bench_util.h"
#include "common/zoo.h"
#include "coordinator/farm.h"
#include "coordinator/search.h"

namespace {

using namespace ios;
using namespace ios::coordinator;
using bench::Clock;
using bench::Median;
using bench::Seconds;

double TimeMeasureAll(Measurer& measurer, const std::vector<const StageSpec*>& specs) {
  size_t received = 0;
  const auto start = Clock::now();
  measurer.MeasureAll(specs, 1, MeasureSettings{},
                      [&](std::span<const IndexedResult> results) { received += results.size(); });
  const double seconds = Seconds(start);
  if (received != specs.size()) std::fprintf(stderr, "lost results!\n");
  return seconds;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string model = argc > 1 ? argv[1] : "nasnet";
  const int repeats = argc > 2 ? std::max(1, std::atoi(argv[2])) : 3;
  const int local_workers = argc > 3 ? std::max(1, std::atoi(argv[3])) : 1;
  spdlog::set_level(spdlog::level::warn);
  const Graph graph = BuildZooModel(model);
  SearchOptions options;
  const SearchPlan plan = PlanSearch(graph, options);
  StageKeyer keyer(graph);
  std::vector<StageSpec> specs;
  for (size_t i = 0; i < plan.stage_count(); ++i) {
    specs.push_back(keyer.Spec(plan.StageOf(static_cast<int>(i))));
  }
  std::vector<const StageSpec*> pointers;
  for (const StageSpec& s : specs) pointers.push_back(&s);

  auto local = MakeLocalMeasurer(devices::BuiltinRegistry().OpenBackend("sim:v100"));
  FarmOptions farm_options;
  farm_options.local_workers = local_workers;
  farm_options.min_workers = local_workers;
  auto farm = Farm::Start(farm_options);
  std::vector<double> in_process, through_farm, with_db;
  for (int r = 0; r < repeats; ++r) {
    in_process.push_back(TimeMeasureAll(*local, pointers));
    through_farm.push_back(TimeMeasureAll(*farm, pointers));
    auto store = db::ProfileStore::Open(":memory:");
    const auto start = Clock::now();
    MeasureStages(graph, plan, *store, *farm, options);
    with_db.push_back(Seconds(start));
  }
  const double n = static_cast<double>(specs.size());
  const double a = Median(in_process), b = Median(through_farm), c = Median(with_db);
  std::printf("model %s: %zu distinct stages, %d embedded worker(s), median of %d\n", model.c_str(),
              specs.size(), local_workers, repeats);
  std::printf("  in-process (sim backend called directly): %7.3f s  %6.1f us/stage\n", a,
              1e6 * a / n);
  std::printf("  through the farm (inproc, same protocol): %7.3f s  %6.1f us/stage\n", b,
              1e6 * b / n);
  std::printf("  farm + profiling DB (:memory:, commits):  %7.3f s  %6.1f us/stage\n", c,
              1e6 * c / n);
  std::printf("  farm overhead per query:                            %6.1f us\n",
              1e6 * (b - a) / n);
  return 0;
}
