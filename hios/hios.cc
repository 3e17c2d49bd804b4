#include "hios/hios.h"

#include <chrono>

#include "common/error.h"
#include "hios/lp.h"
#include "hios/mr.h"

namespace ios::hios {
namespace {

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

double LatencyOf(const Dag& dag, const Costs& costs, const MultiSchedule& q) {
  const Timeline t = Evaluate(dag, costs, q);
  if (!t.acyclic) throw Error("hios: a mapping in priority order has a cycle: " + t.problem);
  return t.latency_ms;
}

}  // namespace

const char* ToString(Mapper mapper) { return mapper == Mapper::kLp ? "lp" : "mr"; }

Mapper ParseMapper(const std::string& text) {
  if (text == "lp") return Mapper::kLp;
  if (text == "mr") return Mapper::kMr;
  throw Error("multi-device mapper '" + text +
              "': expected lp (longest paths) or mr (mapping "
              "recording)");
}

HiosResult Schedule(const Dag& dag, const Costs& costs, const HiosOptions& options,
                    const PrefetchFn& prefetch) {
  ValidateWindowOptions(options.window);
  HiosResult result;
  auto start = std::chrono::steady_clock::now();
  const std::vector<OpId> order = PriorityOrder(dag, costs);
  const std::vector<int> device_of = options.mapper == Mapper::kLp
                                         ? MapLongestPaths(dag, costs)
                                         : MapByRecording(dag, costs).device_of;
  result.mapped = SingletonSchedule(costs.devices(), device_of, order);
  result.mapped_ms = LatencyOf(dag, costs, result.mapped);
  const MultiSchedule one_device =
      SingletonSchedule(costs.devices(), std::vector<int>(device_of.size(), 0), order);
  result.one_device_ms = LatencyOf(dag, costs, one_device);
  result.one_device_won = result.one_device_ms < result.mapped_ms;
  result.map_s = SecondsSince(start);

  start = std::chrono::steady_clock::now();
  const MultiSchedule& from = result.one_device_won ? one_device : result.mapped;
  if (prefetch) prefetch(WindowCandidates(dag, from, options.window));
  result.final = Parallelize(dag, costs, from, options.window);
  result.final_ms = LatencyOf(dag, costs, result.final);
  result.window_s = SecondsSince(start);
  return result;
}

}  // namespace ios::hios
