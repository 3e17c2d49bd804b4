#include "coordinator/weight_warmth.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/printable.h"
#include "common/slices.h"
#include "devices/registry.h"

namespace ios::coordinator {
namespace {

constexpr int64_t kBytesPerValue = sizeof(float);

int64_t Elements(const Shape& s) { return int64_t{s.c} * s.h * s.w; }

int64_t ConvWeightValues(const ConvParams& conv, int in_channels) {
  const int64_t kernel = int64_t{conv.out_channels} * (in_channels / std::max(1, conv.groups)) *
                         conv.kernel.h * conv.kernel.w;
  return kernel + (conv.bias ? conv.out_channels : 0);
}

}  // namespace

NetworkFootprint FootprintOf(const Graph& graph, int batch_size) {
  NetworkFootprint footprint;
  for (NodeId id = 1; id < static_cast<NodeId>(graph.nodes.size()); ++id) {
    const Node& node = graph.nodes[id];
    const bool chain = node.op.kind == OpKind::kSequential && !node.op.chain.empty();
    const OpKind first = chain ? node.op.chain.front().kind : node.op.kind;
    ResolvedInput input;
    try {
      input = ResolveNodeInput(graph, id, first, node.inputs);
    } catch (const Error& e) {
      throw Error("node " + Quoted(node.name) + ": " + e.what());
    }
    int64_t values = static_cast<int64_t>(input.elements_read);
    if (!chain) {
      if (node.op.kind == OpKind::kConv) {
        footprint.weight_bytes += kBytesPerValue * ConvWeightValues(node.op.conv, input.shape.c);
      }
      values += Elements(node.output);
    } else {
      // The first element reads the node's terms, each later one the
      // previous element's output.
      std::vector<Shape> terms = input.TermShapes();
      Shape in = input.shape;
      for (const OpParams& step : node.op.chain) {
        if (step.kind == OpKind::kConv) {
          footprint.weight_bytes += kBytesPerValue * ConvWeightValues(step.conv, in.c);
        }
        in = InferOpOutput(step, terms, "node " + Quoted(node.name));
        terms = {in};
        values += Elements(in);
      }
    }
    footprint.largest_step_bytes =
        std::max(footprint.largest_step_bytes, kBytesPerValue * batch_size * values);
  }
  return footprint;
}

bool WeightsStayWarm(const NetworkFootprint& footprint, int64_t cache_bytes) {
  return cache_bytes > 0 && footprint.weight_bytes + footprint.largest_step_bytes <= cache_bytes;
}

bool DecideWeightWarmth(const Graph& graph, int batch_size, const DeviceInfo& device,
                        MeasureSettings& settings) {
  return DecideWeightWarmth(graph, batch_size, devices::StageCostFactsOf(device).cache_bytes,
                            settings);
}

bool DecideWeightWarmth(const Graph& graph, int batch_size, int64_t cache_bytes,
                        MeasureSettings& settings) {
  if (settings.protocol != StageProtocol::kExecuted) return false;
  const NetworkFootprint footprint = FootprintOf(graph, batch_size);
  settings.warm_weights = WeightsStayWarm(footprint, cache_bytes);
  constexpr double kMiB = 1 << 20;
  spdlog::info("weights {}: {:.1f} MiB of weights and {:.1f} MiB of the largest step against {}",
               settings.warm_weights ? "warm" : "cold", footprint.weight_bytes / kMiB,
               footprint.largest_step_bytes / kMiB,
               cache_bytes > 0 ? fmt::format("{:.1f} MiB of cache", cache_bytes / kMiB)
                               : std::string("a cache of unknown size"));
  return true;
}

}  // namespace ios::coordinator
