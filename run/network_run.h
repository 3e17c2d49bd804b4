// Running a whole network under a schedule on an execution device: what
// ios-run does, as a library so tests and benchmarks drive it directly.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "common/graph.h"
#include "common/measurement.h"
#include "common/stage.h"
#include "exec/device.h"
#include "exec/program.h"
#include "exec/weights.h"

namespace ios::run {

//! Stages of a whole network in execution order, and where they came from.
struct NetworkSchedule {
  std::string name;  // "sequential", "greedy" or the schedule file
  std::vector<Stage> stages;
};

//! One operator per stage, block after block.
NetworkSchedule SequentialNetworkSchedule(const Graph& graph);
//! Every ready operator of a block in one concurrent stage (the greedy
//! baseline of the search), block after block.
NetworkSchedule GreedyNetworkSchedule(const Graph& graph);

//! End-to-end latency of repeated whole-network runs.
struct Timing {
  MeasureResult protocol;         // median and spread of the repeat means
  double min_ms = 0, max_ms = 0;  // fastest and slowest repeat mean
  int repeats = 0;
};

//! Times whole runs with the shared protocol (exec/protocol.h) over
//! `timed_runs` (n runs -> elapsed ms), keeping the fastest and slowest
//! repeat mean.
Timing TimeRuns(const MeasureSettings& settings, const std::function<double(int runs)>& timed_runs);

struct Execution {
  std::vector<float> output;  // the network's output, batch x c x h x w
  Shape output_shape;
  exec::MemoryPlanSummary memory;
  int stages = 0, steps = 0;
  Timing timing;  // only when timed
  //! With replay: the timing of replays of the recorded network (CUDA
  //! graphs) and the output read after them.
  std::optional<Timing> replay;
  std::vector<float> replay_output;
};

//! Builds `schedule` of `graph` as one program, prepares it on `device` at
//! `batch`, writes `input` (batch x input shape values), runs it once and
//! reads the output; then, when `timing` is given, times whole runs with
//! the shared protocol, and when `replay_timing` is given, records the
//! network once (after those runs: nothing is chosen or allocated while
//! recording) and times replays of it the same way. Throws exec::ExecError
//! or ios::Error with context (also when replay is asked of a device that
//! cannot, see exec::PreparedProgram::CanReplay).
Execution Execute(exec::Device& device, const Graph& graph, const NetworkSchedule& schedule,
                  const exec::WeightStore& weights, int batch, std::span<const float> input,
                  const MeasureSettings* timing, const MeasureSettings* replay_timing = nullptr);

//! What ios-run times. A device that can record a network (CUDA graphs)
//! runs it as one replayed graph by default, as a deployment would; the
//! streamed runs are timed only when asked (--streams), and both with
//! --streams --cuda-graph. Other devices run streamed.
struct RunModes {
  bool streams = false;
  bool graph = false;
};
//! `replays`: the device can record a network; `streams_flag`,
//! `graph_flag`: --streams and --cuda-graph. Throws ios::Error for
//! --cuda-graph on a device that cannot record.
RunModes ChooseRunModes(bool replays, bool streams_flag, bool graph_flag,
                        const std::string& device = "this device");

//! Execute with the timings `modes` names, each under `timing`.
Execution Execute(exec::Device& device, const Graph& graph, const NetworkSchedule& schedule,
                  const exec::WeightStore& weights, int batch, std::span<const float> input,
                  const RunModes& modes, const MeasureSettings& timing);

//! How far `got` is from `want`: the largest absolute difference, against
//! the largest absolute value of `want`.
struct Comparison {
  double max_abs_diff = 0;
  double max_abs_reference = 0;
  //! True when max_abs_diff <= relative * max_abs_reference (and sizes agree).
  bool Within(double relative) const;
  bool sizes_differ = false;
};
Comparison Compare(std::span<const float> got, std::span<const float> want);

//! Whether the naive reference device runs `graph` at `batch` in a few
//! seconds at most (a bound on its multiply-adds).
bool SmallEnoughForReference(const Graph& graph, int batch);

}  // namespace ios::run
