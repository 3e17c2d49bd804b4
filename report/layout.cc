#include "report/layout.h"

#include <algorithm>
#include <cmath>

namespace ios::report {
namespace {

double AloneOf(const std::vector<double>& alone_ms, NodeId v) {
  const size_t i = static_cast<size_t>(v);
  return i < alone_ms.size() ? alone_ms[i] : kNoFigure;
}

// The lanes a stage occupies on the device: a merge stage runs as one
// convolution whatever its group count.
int LanesOf(const StageRow& stage) {
  if (stage.strategy == Strategy::kMerge) return 1;
  return std::max(1, static_cast<int>(stage.groups.size()));
}

// Lays one stage at `start` on rows [first_row, first_row + lanes).
void LayOutStage(const StageRow& stage, int index, int device, int first_row, int rows,
                 double start, const std::vector<double>& alone_ms, TimelineLayout& out) {
  StageBox box;
  box.stage = index;
  box.device = device;
  box.first_row = first_row;
  box.rows = rows;
  box.start_ms = start;
  box.merged = stage.strategy == Strategy::kMerge && stage.groups.size() > 1;

  // Each lane's alone sum; one unknown operator makes the whole stage fall
  // back to equal shares, since mixing measured and made-up widths would
  // mislead more than equal boxes do.
  bool known = true;
  std::vector<double> lane_ms;
  std::vector<int> lane_ops;
  for (const auto& group : stage.groups) {
    double sum = 0;
    for (NodeId v : group) {
      const double ms = AloneOf(alone_ms, v);
      if (!(std::isfinite(ms) && ms >= 0)) known = false;
      sum += ms;
    }
    lane_ms.push_back(sum);
    lane_ops.push_back(static_cast<int>(group.size()));
  }
  double longest_ms = 0;
  int longest_ops = 0;
  for (size_t l = 0; l < lane_ms.size(); ++l) {
    longest_ms = std::max(longest_ms, lane_ms[l]);
    longest_ops = std::max(longest_ops, lane_ops[l]);
  }
  if (std::isfinite(stage.latency_ms) && stage.latency_ms >= 0) {
    box.width_ms = stage.latency_ms;
  } else {
    box.estimated = true;
    box.width_ms = known ? longest_ms : 0;
  }
  out.stages.push_back(box);

  if (box.merged || (stage.strategy == Strategy::kMerge && stage.groups.size() == 1)) {
    OpBox op{{}, index, device, first_row, start, box.width_ms};
    for (const auto& group : stage.groups)
      op.nodes.insert(op.nodes.end(), group.begin(), group.end());
    out.ops.push_back(std::move(op));
    return;
  }
  const bool by_alone = known && longest_ms > 0;
  const double scale =
      by_alone ? box.width_ms / longest_ms : (longest_ops > 0 ? box.width_ms / longest_ops : 0);
  for (size_t l = 0; l < stage.groups.size(); ++l) {
    double at = start;
    for (NodeId v : stage.groups[l]) {
      const double width = scale * (by_alone ? AloneOf(alone_ms, v) : 1.0);
      out.ops.push_back(OpBox{{v}, index, device, first_row + static_cast<int>(l), at, width});
      at += width;
    }
  }
}

}  // namespace

TimelineLayout LayOutTimeline(const ScheduleRow& schedule, const std::vector<double>& alone_ms) {
  TimelineLayout out;
  for (const StageRow& stage : schedule.stages) out.rows = std::max(out.rows, LanesOf(stage));
  out.device_first_row = {0};
  out.device_rows = {out.rows};
  double at = 0;
  for (size_t k = 0; k < schedule.stages.size(); ++k) {
    const StageRow& stage = schedule.stages[k];
    LayOutStage(stage, static_cast<int>(k), 0, 0, LanesOf(stage), at, alone_ms, out);
    at += out.stages.back().width_ms;
  }
  out.total_ms = at;
  return out;
}

TimelineLayout LayOutMultiDevice(const MultiDeviceView& view, const std::vector<double>& alone_ms) {
  TimelineLayout out;
  for (size_t d = 0; d < view.devices.size(); ++d) {
    int rows = 1;
    for (const StageRow& stage : view.devices[d].stages) rows = std::max(rows, LanesOf(stage));
    out.device_first_row.push_back(out.rows);
    out.device_rows.push_back(rows);
    for (size_t k = 0; k < view.devices[d].stages.size(); ++k) {
      const StageRow& stage = view.devices[d].stages[k];
      const double start = std::isfinite(stage.start_ms) ? stage.start_ms : 0;
      LayOutStage(stage, static_cast<int>(k), static_cast<int>(d), out.rows, LanesOf(stage), start,
                  alone_ms, out);
      out.total_ms = std::max(out.total_ms, start + out.stages.back().width_ms);
    }
    out.rows += rows;
  }
  for (size_t t = 0; t < view.transfers.size(); ++t) {
    const TransferRow& transfer = view.transfers[t];
    LinkBox box{static_cast<int>(t), 0, 0};
    if (std::isfinite(transfer.start_ms)) {
      box.start_ms = transfer.start_ms;
      if (std::isfinite(transfer.finish_ms)) {
        box.width_ms = std::max(0.0, transfer.finish_ms - transfer.start_ms);
      }
    }
    out.total_ms = std::max(out.total_ms, box.start_ms + box.width_ms);
    out.links.push_back(box);
  }
  return out;
}

GraphLayout LayOutGraph(const Graph& graph, int sweeps) {
  GraphLayout out;
  const size_t n = graph.nodes.size();
  out.layer.assign(n, 0);
  out.x.assign(n, 0);
  if (n == 0) return out;
  std::vector<std::vector<NodeId>> producers(n), consumers(n);
  for (size_t v = 0; v < n; ++v) {
    producers[v] = DistinctProducers(graph.nodes[v]);
    for (NodeId p : producers[v]) {
      consumers[static_cast<size_t>(p)].push_back(static_cast<NodeId>(v));
      out.edges.emplace_back(p, static_cast<NodeId>(v));
      // Ids are topological, so every producer's layer is already final.
      out.layer[v] = std::max(out.layer[v], out.layer[static_cast<size_t>(p)] + 1);
    }
  }
  for (int l : out.layer) out.layers = std::max(out.layers, l + 1);
  std::vector<std::vector<NodeId>> layers(static_cast<size_t>(out.layers));
  for (size_t v = 0; v < n; ++v)
    layers[static_cast<size_t>(out.layer[v])].push_back(static_cast<NodeId>(v));
  for (const auto& layer : layers) out.width = std::max(out.width, static_cast<int>(layer.size()));
  // Positions are centred on the widest layer throughout, so a narrow
  // layer's barycenters compare with a wide one's.
  std::vector<double> position(n, 0);
  const auto number = [&](const std::vector<NodeId>& layer) {
    const double offset = (out.width - static_cast<double>(layer.size())) / 2;
    for (size_t i = 0; i < layer.size(); ++i) {
      position[static_cast<size_t>(layer[i])] = static_cast<double>(i) + offset;
    }
  };
  for (const auto& layer : layers) number(layer);

  // Barycenter: a node's key is the mean position of its neighbours on the
  // side of the sweep (long edges count their far end, so no dummy nodes are
  // needed); a node with none keeps its place. The stable sort with the old
  // position as tie-break makes the result deterministic.
  std::vector<std::pair<double, double>> keys(n);
  for (int sweep = 0; sweep < sweeps; ++sweep) {
    const bool down = sweep % 2 == 0;
    const auto& neighbours = down ? producers : consumers;
    for (size_t i = 0; i < layers.size(); ++i) {
      auto& layer = layers[down ? i : layers.size() - 1 - i];
      for (NodeId v : layer) {
        const auto& near = neighbours[static_cast<size_t>(v)];
        double key = position[static_cast<size_t>(v)];
        if (!near.empty()) {
          double sum = 0;
          for (NodeId u : near) sum += position[static_cast<size_t>(u)];
          key = sum / static_cast<double>(near.size());
        }
        keys[static_cast<size_t>(v)] = {key, position[static_cast<size_t>(v)]};
      }
      std::stable_sort(layer.begin(), layer.end(), [&](NodeId a, NodeId b) {
        return keys[static_cast<size_t>(a)] < keys[static_cast<size_t>(b)];
      });
      number(layer);
    }
  }
  out.x = position;
  // Edges were added consumer by consumer, producers ascending
  // (DistinctProducers): already in the documented order.
  return out;
}

}  // namespace ios::report
