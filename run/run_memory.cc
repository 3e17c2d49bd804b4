#include "run/run_memory.h"

#include <chrono>
#include <cstdio>

#include "exec/tensor_layout.h"
#include "memory/memory_model.h"

namespace ios::run {
namespace {

double MiB(int64_t bytes) { return static_cast<double>(bytes) / (1 << 20); }

std::string Format(const char* format, double a, double b) {
  char text[96];
  std::snprintf(text, sizeof text, format, a, b);
  return text;
}

nlohmann::json OutcomeJson(const memory::SiteOutcome& o) {
  nlohmann::json out = {{"site", o.site},
                        {"form", memory::ToString(o.form)},
                        {"peak_before", o.peak_before},
                        {"peak_after", o.peak_after},
                        {"changed_parts_peak_before", o.local_before},
                        {"changed_parts_peak_after", o.local_after}};
  if (!o.reason.empty()) out["reason"] = o.reason;
  return out;
}

}  // namespace

int64_t ModelPeak(const Graph& graph, const std::vector<Stage>& stages, int batch) {
  std::vector<std::vector<NodeId>> members;
  for (const Stage& stage : stages) {
    members.emplace_back();
    for (const auto& group : stage.groups) {
      members.back().insert(members.back().end(), group.begin(), group.end());
    }
  }
  return memory::PeakOf(graph, members, batch);
}

NetworkSchedule NamedSchedule(const Graph& graph, const std::string& name, int batch,
                              std::optional<memory::NetworkOrder>* order) {
  if (name == "memory") {
    memory::NetworkOrderOptions options;  // the default model: what ios-run allocates
    options.batch = batch;
    *order = memory::OptimalNetworkOrder(graph, options);
    return {"memory", (*order)->Stages()};
  }
  return name == "sequential" ? SequentialNetworkSchedule(graph) : GreedyNetworkSchedule(graph);
}

std::string MemoryOrderNote(const std::optional<memory::NetworkOrder>& order) {
  if (!order) return "";
  char text[160];
  std::snprintf(text, sizeof text, "; least-peak order%s, %.3f s; Kahn order %.2f MiB",
                order->optimal ? "" : " for its parts", order->seconds,
                MiB(order->kahn_peak_bytes));
  return text;
}

nlohmann::json MemoryOrderJson(const std::optional<memory::NetworkOrder>& order) {
  if (!order) return nullptr;
  return {{"optimal", order->optimal},
          {"parts", order->parts.size()},
          {"seconds", order->seconds},
          {"kahn_peak_bytes", order->kahn_peak_bytes},
          {"node_order_peak_bytes", order->node_order_peak_bytes},
          {"greedy_peak_bytes", order->greedy_peak_bytes},
          {"warnings", order->warnings}};
}

MemoryRewriteRun RewriteForMemory(const Graph& graph, const std::string& schedule, int batch) {
  MemoryRewriteRun run;
  run.schedule = schedule;
  memory::NetworkOrderOptions options;  // the model ios-run allocates, as --schedule memory
  options.batch = batch;
  const auto start = std::chrono::steady_clock::now();
  run.rewrite = memory::RewriteForMemory(graph, memory::LeastPeakRegionPeaks(options));
  run.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::optional<memory::NetworkOrder> order;
  const NetworkSchedule original = NamedSchedule(graph, schedule, batch, &order);
  run.original_model_peak = ModelPeak(graph, original.stages, batch);
  run.original_live_peak = exec::PlanMemory(graph, original.stages).peak_live_bytes * batch;
  return run;
}

std::vector<std::string> RewriteLines(const MemoryRewriteRun& run) {
  const memory::MemoryRewrite& r = run.rewrite;
  std::vector<std::string> lines;
  for (const memory::SiteOutcome& o : r.accepted) {
    lines.push_back(
        "rewrite: kept " + o.site + " as " + memory::ToString(o.form) + ": " +
        Format("changed parts' peak %.3f -> %.3f MiB", MiB(o.local_before), MiB(o.local_after)) +
        Format(", graph %.3f -> %.3f MiB", MiB(o.peak_before), MiB(o.peak_after)));
  }
  for (const memory::SiteOutcome& o : r.rejected) {
    lines.push_back("rewrite: rejected " + o.site + ": " + o.reason);
  }
  char summary[320];
  std::snprintf(summary, sizeof summary,
                "rewrite: %zu site(s) kept, %zu rejected, %zu concatenation(s) not sites; judged "
                "by the least-peak order's part peaks: graph %.3f -> %.3f MiB (%.3f s)",
                r.accepted.size(), r.rejected.size(), r.skipped.size(), MiB(r.peak_before),
                MiB(r.peak_after), run.seconds);
  lines.push_back(summary);
  return lines;
}

std::string RewritePeakLine(const MemoryRewriteRun& run, int64_t model_peak, int64_t live_peak) {
  return Format("model peak %.2f -> %.2f MiB, ", MiB(run.original_model_peak), MiB(model_peak)) +
         Format("live at peak %.2f -> %.2f MiB", MiB(run.original_live_peak), MiB(live_peak)) +
         " (the original network under --schedule " + run.schedule + " -> the rewritten)";
}

nlohmann::json RewriteJson(const MemoryRewriteRun& run) {
  const memory::MemoryRewrite& r = run.rewrite;
  nlohmann::json accepted = nlohmann::json::array(), rejected = nlohmann::json::array(),
                 skipped = nlohmann::json::array();
  for (const auto& o : r.accepted) accepted.push_back(OutcomeJson(o));
  for (const auto& o : r.rejected) rejected.push_back(OutcomeJson(o));
  for (const auto& s : r.skipped) skipped.push_back({{"node", s.name}, {"reason", s.reason}});
  return {{"judged_by", "least-peak order, part peaks"},
          {"seconds", run.seconds},
          {"least_peak_before", r.peak_before},
          {"least_peak_after", r.peak_after},
          {"accepted", accepted},
          {"rejected", rejected},
          {"skipped", skipped},
          {"original",
           {{"model_peak_activation_bytes", run.original_model_peak},
            {"peak_live_activation_bytes", run.original_live_peak}}}};
}

}  // namespace ios::run
