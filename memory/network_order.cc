#include "memory/network_order.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <deque>

#include "common/blocks.h"
#include "common/error.h"
#include "common/part_dag.h"
#include "common/printable.h"

namespace ios::memory {
namespace {

using Clock = std::chrono::steady_clock;

// Whether `parts` cut `block` into parts the search can take: together the
// block's operators once each, each part in topological order and of at most
// `max_operators`, every edge between parts going forward.
bool UsableParts(const Graph& graph, const Block& block,
                 const std::vector<std::vector<NodeId>>& parts, int max_operators) {
  if (parts.empty()) return false;
  std::vector<int> part_of(graph.nodes.size(), -1);
  size_t count = 0;
  for (size_t k = 0; k < parts.size(); ++k) {
    if (parts[k].empty() || static_cast<int>(parts[k].size()) > max_operators) return false;
    for (NodeId id : parts[k]) {
      if (id <= 0 || id >= static_cast<NodeId>(graph.nodes.size())) return false;
      if (part_of[static_cast<size_t>(id)] != -1) return false;
      part_of[static_cast<size_t>(id)] = static_cast<int>(k);
      ++count;
    }
  }
  const std::vector<NodeId> ops = block.Operators();
  if (count != ops.size()) return false;
  for (NodeId id : ops) {
    if (part_of[static_cast<size_t>(id)] == -1) return false;
  }
  for (size_t k = 0; k < parts.size(); ++k) {
    for (size_t i = 0; i < parts[k].size(); ++i) {
      for (NodeId p : DistinctProducers(graph.node(parts[k][i]))) {
        const int from = part_of[static_cast<size_t>(p)];
        if (from > static_cast<int>(k)) return false;
        if (from == static_cast<int>(k) &&
            std::find(parts[k].begin(), parts[k].begin() + static_cast<std::ptrdiff_t>(i), p) ==
                parts[k].begin() + static_cast<std::ptrdiff_t>(i)) {
          return false;  // read before it is written: not topological
        }
      }
    }
  }
  return true;
}

// The parts of `block`: itself when small enough, else the graph's own parts
// of a block with exactly its operators (those over `max_operators` cut by
// NarrowParts, as a rewrite's partials can grow a part: its other parts, and
// their peaks, stay as they were), else NarrowParts.
std::vector<std::vector<NodeId>> PartsOf(const Graph& graph, const Block& block,
                                         int max_operators) {
  std::vector<NodeId> ops = block.Operators();
  if (static_cast<int>(ops.size()) <= max_operators) return {ops};
  std::sort(ops.begin(), ops.end());
  for (const Block& own : graph.blocks) {
    std::vector<NodeId> own_ops = own.Operators();
    std::sort(own_ops.begin(), own_ops.end());
    if (own_ops != ops || !UsableParts(graph, block, own.parts, PartDag::kMaxOperators)) continue;
    std::vector<std::vector<NodeId>> parts;
    for (const std::vector<NodeId>& part : own.parts) {
      if (static_cast<int>(part.size()) <= max_operators) {
        parts.push_back(part);
        continue;
      }
      const std::vector<std::vector<NodeId>> pieces = NarrowParts(
          graph, Block{0, {part.begin(), part.end() - 1}, part.back(), {}}, max_operators);
      parts.insert(parts.end(), pieces.begin(), pieces.end());
    }
    return parts;
  }
  return NarrowParts(graph, block, max_operators);
}

std::vector<std::vector<NodeId>> OneEach(const std::vector<NodeId>& order) {
  std::vector<std::vector<NodeId>> stages;
  stages.reserve(order.size());
  for (NodeId id : order) stages.push_back({id});
  return stages;
}

std::vector<NodeId> ToNodes(const std::vector<NodeId>& part, const std::vector<int>& local) {
  std::vector<NodeId> nodes;
  nodes.reserve(local.size());
  for (int i : local) nodes.push_back(part[static_cast<size_t>(i)]);
  return nodes;
}

std::string Kilobytes(int64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f KB", static_cast<double>(bytes) / 1024);
  return text;
}

// OptimalPartOrder's reasons start with the prefix our lines start with.
std::string WithoutPrefix(const std::string& why) {
  const std::string prefix = "memory order: ";
  return why.rfind(prefix, 0) == 0 ? why.substr(prefix.size()) : why;
}

// "memory order: 'nasnet' part 3 (block 1, 64 operators from 'cell_2/x'): "
std::string PartLine(const Graph& graph, const std::vector<NodeId>& part, int index, int block) {
  return "memory order: " + Quoted(graph.name) + " part " + std::to_string(index) + " (block " +
         std::to_string(block) + ", " + std::to_string(part.size()) + " operators from " +
         Quoted(graph.node(part.front()).name) + "): ";
}

// A part this small is never re-cut: its down-sets are at most 2^4.
constexpr int kSmallestRecut = 4;

}  // namespace

MemoryOrderOptions NetworkOrderOptions::DefaultOrderOptions() {
  MemoryOrderOptions options;
  options.engine = MemoryOrderOptions::Engine::kBudgeted;
  options.max_states_per_step = 1'000'000;
  options.step_seconds = 0.5;
  options.max_steps = 8;
  return options;
}

std::vector<Stage> NetworkOrder::Stages() const {
  std::vector<Stage> stages;
  stages.reserve(order.size());
  for (NodeId id : order) stages.push_back(Stage{Strategy::kParallel, {{id}}});
  return stages;
}

std::vector<NodeId> NetworkKahnOrder(const Graph& graph) {
  const size_t n = graph.nodes.size();
  std::vector<std::vector<NodeId>> consumers(n);
  std::vector<int> missing(n, 0);
  for (NodeId v = 1; v < static_cast<NodeId>(n); ++v) {
    for (NodeId p : DistinctProducers(graph.node(v))) {
      if (p == 0) continue;  // the input is there before any operator runs
      consumers[static_cast<size_t>(p)].push_back(v);
      ++missing[static_cast<size_t>(v)];
    }
  }
  std::deque<NodeId> ready;
  for (NodeId v = 1; v < static_cast<NodeId>(n); ++v) {
    if (missing[static_cast<size_t>(v)] == 0) ready.push_back(v);
  }
  std::vector<NodeId> order;
  order.reserve(n - 1);
  while (!ready.empty()) {
    const NodeId u = ready.front();
    ready.pop_front();
    order.push_back(u);
    for (NodeId v : consumers[static_cast<size_t>(u)]) {
      if (--missing[static_cast<size_t>(v)] == 0) ready.push_back(v);
    }
  }
  return order;
}

NetworkOrder OptimalNetworkOrder(const Graph& graph, const NetworkOrderOptions& options) {
  const Clock::time_point start = Clock::now();
  if (options.max_part_operators < 1 || options.max_part_operators > PartDag::kMaxOperators) {
    throw Error("memory order: max_part_operators " + std::to_string(options.max_part_operators) +
                " is outside 1.." + std::to_string(PartDag::kMaxOperators));
  }
  if (options.batch < 1) {
    throw Error("memory order: batch " + std::to_string(options.batch) + " is below 1");
  }
  const std::vector<Block> blocks = FindBlocks(graph);
  std::vector<std::vector<NodeId>> parts;
  std::vector<int> block_of, cut;
  for (size_t b = 0; b < blocks.size(); ++b) {
    std::vector<std::vector<NodeId>> of = PartsOf(graph, blocks[b], options.max_part_operators);
    for (std::vector<NodeId>& part : of) {
      block_of.push_back(static_cast<int>(b));
      cut.push_back(of.size() > 1);
      parts.push_back(std::move(part));
    }
  }
  const exec::TensorLayout layout = ModelLayout(graph, options.model);
  const int64_t batch = options.batch;

  NetworkOrder result;
  result.blocks = static_cast<int>(blocks.size());
  result.optimal = true;
  std::vector<NodeId> greedy;
  for (size_t k = 0; k < parts.size(); ++k) {
    const PartDag dag = PartDag::Make(graph, parts[k]);
    const PartMemory costs(layout, parts, k);
    PartOrder found = OptimalPartOrder(dag, costs, options.order);
    result.states += found.states;
    const int size = static_cast<int>(parts[k].size());
    if (!found.exact && options.recut_over_budget && size > kSmallestRecut) {
      // As the IOS search splits a part over its budget: smaller parts are
      // searched exactly, and later parts' costs do not change (the pieces
      // still run after every earlier part and before every later one).
      const int limit = (size + 1) / 2;
      std::vector<std::vector<NodeId>> pieces = NarrowParts(
          graph, Block{0, {parts[k].begin(), parts[k].end() - 1}, parts[k].back(), {}}, limit);
      result.warnings.push_back(PartLine(graph, parts[k], static_cast<int>(k), block_of[k]) +
                                WithoutPrefix(found.why.substr(0, found.why.find("; using"))) +
                                "; cut into " + std::to_string(pieces.size()) +
                                " parts of at most " + std::to_string(limit) + " operators");
      ++result.recuts;
      const auto at = static_cast<std::ptrdiff_t>(k);
      parts.erase(parts.begin() + at);
      parts.insert(parts.begin() + at, pieces.begin(), pieces.end());
      const int block = block_of[k];
      block_of.insert(block_of.begin() + at, pieces.size() - 1, block);
      cut.insert(cut.begin() + at, pieces.size() - 1, 1);
      cut[k + pieces.size() - 1] = 1;
      --k;
      continue;
    }
    const std::vector<NodeId> greedy_part = ToNodes(parts[k], GreedyMemoryOrder(dag, costs));
    greedy.insert(greedy.end(), greedy_part.begin(), greedy_part.end());

    PartOrderRecord record;
    record.block = block_of[k];
    record.order = ToNodes(parts[k], found.ops);
    record.peak_bytes = (costs.Background() + found.peak) * batch;
    record.kahn_peak_bytes = (costs.Background() + PeakOfOrder(costs, KahnOrder(dag))) * batch;
    record.exact = found.exact;
    record.cut = cut[k] != 0;
    record.states = found.states;
    record.steps = found.steps;
    record.seconds = found.seconds;
    record.why = std::move(found.why);
    if (!record.exact) {
      result.warnings.push_back(PartLine(graph, parts[k], static_cast<int>(k), record.block) +
                                WithoutPrefix(record.why));
    }
    result.optimal = result.optimal && record.exact && !record.cut;
    result.peak_bytes = std::max(result.peak_bytes, record.peak_bytes);
    result.order.insert(result.order.end(), record.order.begin(), record.order.end());
    result.parts.push_back(std::move(record));
  }

  std::vector<NodeId> node_order;
  for (NodeId v = 1; v < static_cast<NodeId>(graph.nodes.size()); ++v) node_order.push_back(v);
  const std::vector<NodeId> kahn = NetworkKahnOrder(graph);
  result.kahn_peak_bytes = PeakOf(layout, OneEach(kahn), options.batch);
  result.node_order_peak_bytes = PeakOf(layout, OneEach(node_order), options.batch);
  result.greedy_peak_bytes = PeakOf(layout, OneEach(greedy), options.batch);
  // Orders that cross the parts' boundaries can beat parts ordered on their
  // own (never when every part is exact and no block was cut).
  struct Baseline {
    const std::vector<NodeId>* order;
    int64_t peak;
    const char* name;
  };
  const Baseline baselines[] = {{&kahn, result.kahn_peak_bytes, "Kahn"},
                                {&node_order, result.node_order_peak_bytes, "node-id"},
                                {&greedy, result.greedy_peak_bytes, "greedy"}};
  const Baseline* best = nullptr;
  for (const Baseline& baseline : baselines) {
    if (baseline.peak < (best ? best->peak : result.peak_bytes)) best = &baseline;
  }
  if (best != nullptr) {
    result.warnings.push_back("memory order: " + Quoted(graph.name) + ": the " + best->name +
                              " order's peak " + Kilobytes(best->peak) +
                              " is below the parts' order's " + Kilobytes(result.peak_bytes) +
                              "; running it instead");
    result.order = *best->order;
    result.peak_bytes = best->peak;
    result.optimal = false;
  }
  for (const std::string& warning : result.warnings) spdlog::warn("{}", warning);
  result.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return result;
}

}  // namespace ios::memory
