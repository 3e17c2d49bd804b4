// Serenity's benchmark (issue 24): per model, the peak activation memory of
// the least-peak order (memory/network_order.h) beside a Kahn FIFO order (the
// paper's TensorFlow Lite baseline), node id order (ios-run's sequential
// schedule) and the greedy memory order, at batch 1; whether the order is
// optimal, the states searched, the scheduling time and the process's max
// RSS so far; with the plan model also the arena ios-run allocates (first-fit
// slots, exec/tensor_layout.h) for the Kahn and the least-peak orders, the
// paper's "with allocator" figure. Then the mean Kahn/optimal ratio over the paper's kind of
// graphs (RandWire CIFAR, DARTS, NASNet) among the models given, per network
// and per cell (each part of more than one operator), beside the paper's
// 1.68x. With rewriting (memory/rewrite.h, judged by the least-peak order's
// part peaks, as ios-run --rewrite memory): the least-peak order's peak of
// the rewritten network, the sites kept, and the mean Kahn/rewritten ratio
// beside the paper's 1.86x (--no-rewrite skips it: NASNet takes a minute).
//
//   build/bench/memory_bench [--model-kind plan|per-node|both] [--max-part N]
//       [--states N] [--steps N] [--step-seconds S] [--engine budgeted|best-first]
//       [--parts] [--no-rewrite] MODEL...
//
// MODEL: a zoo name (randwire_cifar10:s=3 included) or a model file.
// --parts also prints every part of more than one operator.
#include <spdlog/spdlog.h>
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

#include "exec/tensor_layout.h"
#include "memory/network_order.h"
#include "memory/rewrite.h"
#include "onnx/model_loader.h"

namespace {

using namespace ios;
using namespace ios::memory;

double KB(int64_t bytes) { return static_cast<double>(bytes) / 1024; }

double MaxRssMiB() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024;  // ru_maxrss is in KiB on Linux
}

// The Serenity paper's benchmark kinds: RandWire CIFAR cells, DARTS cells,
// NASNet (its SwiftNet is not public).
bool PaperKind(const std::string& model) {
  return model.rfind("randwire_cifar", 0) == 0 || model.rfind("darts", 0) == 0 || model == "nasnet";
}

struct Mean {
  double sum = 0;
  int count = 0;
  void Add(double x) {
    sum += x;
    ++count;
  }
  double value() const { return count ? sum / count : 0; }
};

std::vector<Stage> OneEach(const std::vector<NodeId>& order) {
  std::vector<Stage> stages;
  for (NodeId id : order) stages.push_back({Strategy::kParallel, {{id}}});
  return stages;
}

int Usage(const char* why) {
  std::fprintf(
      stderr,
      "memory_bench: %s\nusage: memory_bench [--model-kind plan|per-node|both] "
      "[--max-part N] [--states N] [--steps N] [--step-seconds S] [--engine budgeted|best-first] "
      "[--parts] [--no-rewrite] MODEL...\n",
      why);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  spdlog::set_level(spdlog::level::err);  // fallbacks show in the table
  std::vector<MemoryModel> kinds{MemoryModel::kPlan, MemoryModel::kPerNode};
  NetworkOrderOptions options;
  bool parts = false;
  bool rewrite = true;
  std::vector<std::string> models;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const bool has_value = i + 1 < argc;
    if (arg == "--model-kind" && has_value) {
      const std::string kind = argv[++i];
      if (kind == "plan") {
        kinds = {MemoryModel::kPlan};
      } else if (kind == "per-node") {
        kinds = {MemoryModel::kPerNode};
      } else if (kind != "both") {
        return Usage("--model-kind: plan, per-node or both");
      }
    } else if (arg == "--max-part" && has_value) {
      options.max_part_operators = std::atoi(argv[++i]);
    } else if (arg == "--states" && has_value) {
      options.order.max_states_per_step = std::atoll(argv[++i]);
    } else if (arg == "--steps" && has_value) {
      options.order.max_steps = std::atoi(argv[++i]);
    } else if (arg == "--step-seconds" && has_value) {
      options.order.step_seconds = std::atof(argv[++i]);
    } else if (arg == "--engine" && has_value) {
      const std::string engine = argv[++i];
      if (engine != "budgeted" && engine != "best-first") {
        return Usage("--engine: budgeted or best-first");
      }
      options.order.engine = engine == "budgeted" ? MemoryOrderOptions::Engine::kBudgeted
                                                  : MemoryOrderOptions::Engine::kBestFirst;
    } else if (arg == "--parts") {
      parts = true;
    } else if (arg == "--no-rewrite") {
      rewrite = false;
    } else if (!arg.empty() && arg[0] == '-') {
      return Usage(("unknown option or missing value: " + arg).c_str());
    } else {
      models.push_back(arg);
    }
  }
  if (models.empty()) return Usage("no model given");
  std::printf(
      "# max part %d operators, %lld states a step, %.2f s a step, %d steps, %s\n",
      options.max_part_operators, static_cast<long long>(options.order.max_states_per_step),
      options.order.step_seconds, options.order.max_steps,
      options.order.engine == MemoryOrderOptions::Engine::kBudgeted ? "budgeted" : "best-first");
  std::printf(
      "%-22s %-8s %4s %6s %6s %10s %10s %10s %10s %6s %6s %-11s %9s %8s %7s %10s %10s %10s %6s "
      "%5s %8s\n",
      "model", "kind", "ops", "blocks", "parts", "Kahn KB", "node KB", "greedy KB", "optimal KB",
      "K/opt", "N/opt", "exact", "states", "seconds", "RSS MB", "arena K KB", "arena o KB",
      "rewrite KB", "K/rw", "kept", "rw s");
  Mean network_ratio[2], cell_ratio[2], arena_ratio, rewrite_ratio[2];
  for (const std::string& name : models) {
    Graph graph;
    try {
      graph = LoadAnyModel(name).model.graph;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "memory_bench: %s: %s\n", name.c_str(), e.what());
      return 1;
    }
    for (MemoryModel kind : kinds) {
      options.model = kind;
      NetworkOrder found;
      try {
        found = OptimalNetworkOrder(graph, options);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "memory_bench: %s: %s\n", name.c_str(), e.what());
        return 1;
      }
      int exact = 0;
      for (const PartOrderRecord& part : found.parts) exact += part.exact;
      const char* kind_name = kind == MemoryModel::kPlan ? "plan" : "per-node";
      const double ratio = static_cast<double>(found.kahn_peak_bytes) / found.peak_bytes;
      const std::string exactness =
          (found.optimal ? "optimal"
                         : std::to_string(exact) + "/" + std::to_string(found.parts.size())) +
          (found.recuts ? " r" + std::to_string(found.recuts) : "");
      std::string arena = "         -          -";
      if (kind == MemoryModel::kPlan) {
        char text[32];
        const int64_t kahn_arena =
            exec::PlanMemory(graph, OneEach(NetworkKahnOrder(graph))).allocated_bytes;
        const int64_t arena_bytes = exec::PlanMemory(graph, found.Stages()).allocated_bytes;
        std::snprintf(text, sizeof text, "%10.1f %10.1f", KB(kahn_arena), KB(arena_bytes));
        arena = text;
        if (PaperKind(name)) arena_ratio.Add(static_cast<double>(kahn_arena) / arena_bytes);
      }
      const int k = kind == MemoryModel::kPlan ? 0 : 1;
      const bool paper = PaperKind(name);
      std::string rewritten = "         -      -     -        -";
      if (rewrite) {
        // Kept where the least-peak order's part peaks drop; the rewritten
        // network's peak is its own least-peak order's.
        const auto start = std::chrono::steady_clock::now();
        const MemoryRewrite r = RewriteForMemory(graph, LeastPeakRegionPeaks(options));
        const int64_t peak = OptimalNetworkOrder(r.rewritten.graph, options).peak_bytes;
        const double seconds =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        const double rewrite_k = static_cast<double>(found.kahn_peak_bytes) / peak;
        char text[64];
        const std::string kept = std::to_string(r.accepted.size()) + "/" +
                                 std::to_string(r.accepted.size() + r.rejected.size());
        std::snprintf(text, sizeof text, "%10.1f %6.3f %5s %8.3f", KB(peak), rewrite_k,
                      kept.c_str(), seconds);
        rewritten = text;
        if (paper) rewrite_ratio[k].Add(rewrite_k);
      }
      std::printf(
          "%-22s %-8s %4d %6d %6zu %10.1f %10.1f %10.1f %10.1f %6.3f %6.3f %-11s %9lld %8.3f "
          "%7.1f %s %s\n",
          name.c_str(), kind_name, graph.OperatorCount(), found.blocks, found.parts.size(),
          KB(found.kahn_peak_bytes), KB(found.node_order_peak_bytes), KB(found.greedy_peak_bytes),
          KB(found.peak_bytes), ratio,
          static_cast<double>(found.node_order_peak_bytes) / found.peak_bytes, exactness.c_str(),
          static_cast<long long>(found.states), found.seconds, MaxRssMiB(), arena.c_str(),
          rewritten.c_str());
      if (paper) network_ratio[k].Add(ratio);
      for (size_t p = 0; p < found.parts.size(); ++p) {
        const PartOrderRecord& part = found.parts[p];
        if (part.order.size() < 2) continue;
        const double part_ratio = static_cast<double>(part.kahn_peak_bytes) / part.peak_bytes;
        if (paper) cell_ratio[k].Add(part_ratio);
        if (parts) {
          std::printf(
              "  part %3zu block %3d %3zu ops: Kahn %10.1f KB, optimal %10.1f KB, %.3fx%s%s, "
              "%lld states, %d steps, %.3f s%s%s\n",
              p, part.block, part.order.size(), KB(part.kahn_peak_bytes), KB(part.peak_bytes),
              part_ratio, part.exact ? "" : ", fallback", part.cut ? ", cut" : "",
              static_cast<long long>(part.states), part.steps, part.seconds,
              part.why.empty() ? "" : ": ", part.why.c_str());
        }
      }
      std::fflush(stdout);
    }
  }
  for (int k = 0; k < 2; ++k) {
    if (network_ratio[k].count == 0) continue;
    std::printf(
        "mean Kahn/optimal over the paper's kind (%s model): %.3fx over %d networks, %.3fx over "
        "%d cells of more than one operator (paper: 1.68x)\n",
        k == 0 ? "plan" : "per-node", network_ratio[k].value(), network_ratio[k].count,
        cell_ratio[k].value(), cell_ratio[k].count);
  }
  for (int k = 0; k < 2; ++k) {
    if (rewrite_ratio[k].count == 0) continue;
    std::printf(
        "mean Kahn/rewritten least-peak order over the paper's kind (%s model): %.3fx over %d "
        "networks (paper, with rewriting: 1.86x)\n",
        k == 0 ? "plan" : "per-node", rewrite_ratio[k].value(), rewrite_ratio[k].count);
  }
  if (arena_ratio.count > 0) {
    std::printf(
        "mean Kahn/least-peak order arena (first-fit slots, plan model): %.3fx over %d networks "
        "(the least-peak order minimises the live peak, not the arena)\n",
        arena_ratio.value(), arena_ratio.count);
  }
  return 0;
}
