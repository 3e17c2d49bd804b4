#include "run/network_run.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "common/error.h"
#include "common/slices.h"
#include "coordinator/dp.h"
#include "exec/protocol.h"

namespace ios::run {
namespace {

//! Blocks in order; every operator of the network is in exactly one block.
std::vector<std::vector<NodeId>> BlockOperators(const Graph& graph) {
  std::vector<std::vector<NodeId>> blocks;
  for (const Block& block : graph.blocks) blocks.push_back(block.Operators());
  return blocks;
}

}  // namespace

NetworkSchedule SequentialNetworkSchedule(const Graph& graph) {
  NetworkSchedule schedule{"sequential", {}};
  for (const std::vector<NodeId>& ops : BlockOperators(graph)) {
    for (Stage& stage : coordinator::SequentialSchedule(ops)) {
      schedule.stages.push_back(std::move(stage));
    }
  }
  return schedule;
}

NetworkSchedule GreedyNetworkSchedule(const Graph& graph) {
  NetworkSchedule schedule{"greedy", {}};
  for (const std::vector<NodeId>& ops : BlockOperators(graph)) {
    for (Stage& stage : coordinator::GreedySchedule(graph, ops)) {
      schedule.stages.push_back(std::move(stage));
    }
  }
  return schedule;
}

Timing TimeRuns(const MeasureSettings& settings,
                const std::function<double(int runs)>& timed_runs) {
  Timing timing;
  // Record every repeat mean for min and max; the first call is the warmup.
  std::vector<double> means;
  bool warm = settings.warmup == 0;
  timing.protocol = exec::RunProtocol(settings, [&](int runs) {
    const double ms = timed_runs(runs);
    if (warm) means.push_back(ms / runs);
    warm = true;
    return ms;
  });
  if (!means.empty()) {
    const auto [lo, hi] = std::minmax_element(means.begin(), means.end());
    timing.min_ms = *lo;
    timing.max_ms = *hi;
  }
  timing.repeats = static_cast<int>(means.size());
  return timing;
}

Execution Execute(exec::Device& device, const Graph& graph, const NetworkSchedule& schedule,
                  const exec::WeightStore& weights, int batch, std::span<const float> input,
                  const MeasureSettings* timing, const MeasureSettings* replay_timing) {
  exec::NetworkProgram network = exec::BuildNetworkProgram(graph, schedule.stages, weights);
  const exec::Program& program = network.program;
  if (program.inputs.size() != 1 || program.outputs.size() != 1) {
    throw Error("network program of " + graph.name + " must have one input and one output");
  }
  std::unique_ptr<exec::PreparedProgram> prepared = device.Prepare(program, batch);
  if (replay_timing != nullptr && !prepared->CanReplay()) {
    throw Error("device " + device.Info().name +
                " cannot record and replay a network (CUDA graphs are the cuda device's)");
  }
  prepared->Write(program.inputs[0], input);
  prepared->TimedRuns(1);
  Execution execution;
  execution.output = prepared->Read(program.outputs[0]);
  const exec::View& out = program.outputs[0];
  const Shape& buffer = program.buffers.at(static_cast<size_t>(out.buffer)).shape;
  execution.output_shape = Shape{out.channels, buffer.h, buffer.w};
  execution.memory = network.memory;
  execution.stages = static_cast<int>(program.stages.size());
  for (const exec::ProgramStage& stage : program.stages) {
    for (const exec::Lane& lane : stage.lanes) {
      execution.steps += static_cast<int>(lane.steps.size());
    }
  }
  if (timing != nullptr) {
    execution.timing = TimeRuns(*timing, [&](int runs) { return prepared->TimedRuns(runs); });
  }
  if (replay_timing != nullptr) {
    execution.replay =
        TimeRuns(*replay_timing, [&](int runs) { return prepared->TimedReplays(runs); });
    execution.replay_output = prepared->Read(program.outputs[0]);
  }
  return execution;
}

RunModes ChooseRunModes(bool replays, bool streams_flag, bool graph_flag,
                        const std::string& device) {
  if (graph_flag && !replays) {
    throw Error("--cuda-graph needs --device cuda (CUDA graphs), not " + device);
  }
  if (!replays) return {true, false};
  return {streams_flag, graph_flag || !streams_flag};
}

Execution Execute(exec::Device& device, const Graph& graph, const NetworkSchedule& schedule,
                  const exec::WeightStore& weights, int batch, std::span<const float> input,
                  const RunModes& modes, const MeasureSettings& timing) {
  return Execute(device, graph, schedule, weights, batch, input, modes.streams ? &timing : nullptr,
                 modes.graph ? &timing : nullptr);
}

bool Comparison::Within(double relative) const {
  return !sizes_differ && std::isfinite(max_abs_diff) &&
         max_abs_diff <= relative * max_abs_reference;
}

Comparison Compare(std::span<const float> got, std::span<const float> want) {
  Comparison c;
  if (got.size() != want.size()) {
    c.sizes_differ = true;
    return c;
  }
  for (size_t i = 0; i < got.size(); ++i) {
    const double diff = std::fabs(static_cast<double>(got[i]) - want[i]);
    // NaN never compares greater: make it poison the result.
    c.max_abs_diff =
        std::isnan(diff) ? std::numeric_limits<double>::infinity() : std::max(c.max_abs_diff, diff);
    c.max_abs_reference = std::max(c.max_abs_reference, std::fabs(static_cast<double>(want[i])));
  }
  return c;
}

bool SmallEnoughForReference(const Graph& graph, int batch) {
  constexpr double kMaxMultiplyAdds = 3e8;  // a few seconds of plain loops
  double macs = 0;
  for (NodeId id = 1; id < static_cast<NodeId>(graph.nodes.size()); ++id) {
    const Node& node = graph.node(id);
    const std::vector<OpParams> chain =
        node.op.kind == OpKind::kSequential ? node.op.chain : std::vector<OpParams>{node.op};
    const int in_channels = ResolveNodeInput(graph, id, chain.front().kind, node.inputs).shape.c;
    // An estimate: every element of a chain priced at the node's output size
    // and input channels.
    for (const OpParams& op : chain) {
      const double out = static_cast<double>(node.output.c) * node.output.h * node.output.w;
      double work = out;
      if (op.kind == OpKind::kConv) {
        work = out * std::max(1, in_channels / std::max(1, op.conv.groups)) * op.conv.kernel.h *
               op.conv.kernel.w;
      } else if (op.kind == OpKind::kPool) {
        work = out * op.pool.kernel.h * op.pool.kernel.w;
      }
      macs += work * batch;
    }
  }
  return macs <= kMaxMultiplyAdds;
}

}  // namespace ios::run
