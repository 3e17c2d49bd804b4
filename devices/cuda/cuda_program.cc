// A prepared program of the cuda device: its memory, streams and events,
// and the runs, replays, writes and reads (cuda_program.h).
#include "devices/cuda/cuda_program.h"

#include <algorithm>
#include <cstring>

namespace ios::devices::cuda_detail {

using cuda::Code;
using exec::ExecError;

CudaPreparedProgram::CudaPreparedProgram(std::shared_ptr<DeviceState> state,
                                         const exec::Program& program, int batch)
    : state_(std::move(state)), api_(*state_->api), batch_(batch), buffers_(program.buffers) {
  for (const exec::ProgramStage& stage : program.stages) {
    for (const exec::Lane& lane : stage.lanes) {
      for (const exec::Step& step : lane.steps) labels_.push_back(step.label);
    }
  }
  // Both before anything is allocated or asked of cuDNN. Memory first: a
  // stage no GPU could hold is out of memory on every backend (the
  // conformance suite's absurd batch); one that fits, with a tensor cuDNN's
  // int descriptors cannot describe, is unsupported.
  CheckMemory(program);
  CheckTensorLimits(program);
  for (size_t slot = 0; slot < program.slot_elements.size(); ++slot) {
    slots_.push_back(Allocate(api_, static_cast<size_t>(program.slot_elements[slot]) * batch * 4,
                              "storage slot " + std::to_string(slot)));
  }
  UploadWeights(program);
  BorrowStreams(program);
  {
    AlgorithmSearch search(api_, state_->options, state_->algorithms, *state_->pool);
    Compile(program, search);
    search.Finish();
  }
  for (size_t i = 0; i < contexts_.size(); ++i) {
    StreamContext& context = contexts_[i];
    if (context.workspace_needed == 0) continue;
    context.borrowed = state_->pool->WorkspaceOf(i, context.workspace_needed);
    context.workspace = context.borrowed->memory.get();
    context.workspace_bytes = context.borrowed->bytes;
  }
  DecideFusion();
  fork_ = state_->pool->Fork();
  start_ = state_->pool->Start();
  end_ = state_->pool->End();
}

CudaPreparedProgram::~CudaPreparedProgram() {
  // Work still in flight (a run that failed half-way) ends before its
  // memory goes.
  for (StreamContext& context : contexts_) (void)api_.SynchronizeStream(context.stream);
}

void CudaPreparedProgram::Write(int buffer, std::span<const float> values) {
  const size_t count = Elements(buffer);
  if (values.size() != count) {
    throw Error("cuda: Write of buffer " + std::to_string(buffer) + " ('" + buffers_[buffer].label +
                "'): " + std::to_string(values.size()) + " values given, " + std::to_string(count) +
                " expected");
  }
  // The copy is on the legacy stream, which does not wait for ours.
  SynchronizeAll();
  Checked(api_.CopyToDevice(BufferAddress(buffer), values.data(), count * sizeof(float)),
          "writing buffer '" + buffers_[buffer].label + "'");
}

std::vector<float> CudaPreparedProgram::Read(const exec::View& view) {
  const size_t count = Elements(view.buffer);
  const Shape& s = buffers_[view.buffer].shape;
  if (view.offset < 0 || view.channels < 1 || view.offset + view.channels > s.c) {
    throw Error("cuda: Read of channels [" + std::to_string(view.offset) + ", " +
                std::to_string(view.offset + view.channels) + ") of buffer '" +
                buffers_[view.buffer].label + "' with " + std::to_string(s.c) + " channels");
  }
  std::vector<float> whole(count);
  SynchronizeAll();
  Checked(api_.CopyToHost(whole.data(), BufferAddress(view.buffer), count * sizeof(float)),
          "reading buffer '" + buffers_[view.buffer].label + "'");
  const size_t plane = static_cast<size_t>(s.h) * s.w;
  const size_t per_sample = plane * view.channels;
  std::vector<float> values(per_sample * batch_);
  for (int n = 0; n < batch_; ++n) {
    std::memcpy(values.data() + n * per_sample,
                whole.data() + (static_cast<size_t>(n) * s.c + view.offset) * plane,
                per_sample * sizeof(float));
  }
  return values;
}

double CudaPreparedProgram::TimedRuns(int runs) {
  return Timed([&] {
    for (int run = 0; run < runs; ++run) Enqueue();
  });
}

std::string CudaPreparedProgram::Detail() const {
  if (chosen_.empty()) return {};
  std::string text = "cudnn conv algo ";
  for (size_t i = 0; i < chosen_.size(); ++i) {
    text += i ? "," : "";
    text += std::to_string(chosen_[i].algo);
    text += chosen_[i].math == cuda::MathType::kFma       ? "/fma"
            : chosen_[i].math == cuda::MathType::kDefault ? "/default"
                                                          : "/tensor_op";
  }
  return text;
}

double CudaPreparedProgram::TimedReplays(int runs) {
  if (!replay_.exec.get()) replay_ = Capture(1);
  return Timed([&] {
    for (int run = 0; run < runs; ++run) {
      Checked(api_.LaunchGraph(replay_.exec.get(), Origin()), "replaying the program");
    }
  });
}

double CudaPreparedProgram::TimedRunsAsExecuted(int runs, bool warm_weights) {
  // Whether weights stay warm between stages is the cpu's question: a GPU's
  // L2 (50 MiB on an H100) holds no network's weights from one run of a
  // stage to its next inside a network, and HBM has no cold start to model.
  (void)warm_weights;
  if (runs < 1) throw Error("cuda: TimedRunsAsExecuted of " + std::to_string(runs) + " runs");
  if (!executed_.exec.get()) executed_ = Capture(kExecutedCopies);
  const int replays = (runs + kExecutedCopies - 1) / kExecutedCopies;
  const double ms = Timed([&] {
    for (int replay = 0; replay < replays; ++replay) {
      Checked(api_.LaunchGraph(executed_.exec.get(), Origin()), "replaying the stage's copies");
    }
  });
  // The mean copy, for `runs` runs: the caller divides by `runs`.
  return ms * runs / (static_cast<double>(replays) * kExecutedCopies);
}

void CudaPreparedProgram::SynchronizeAll() {
  for (StreamContext& context : contexts_) {
    Checked(api_.SynchronizeStream(context.stream), "waiting for the program's streams");
  }
}

void CudaPreparedProgram::Checked(const cuda::Status& status, const std::string& where) {
  if (status.code == Code::kDeviceLost) state_->lost = true;
  Check(status, where);
}

size_t CudaPreparedProgram::Elements(int buffer) const {
  if (buffer < 0 || buffer >= static_cast<int>(buffers_.size())) {
    throw Error("cuda: no buffer " + std::to_string(buffer) + " (the program has " +
                std::to_string(buffers_.size()) + ")");
  }
  const Shape& s = buffers_[buffer].shape;
  return static_cast<size_t>(batch_) * s.c * s.h * s.w;
}

float* CudaPreparedProgram::BufferAddress(int buffer) const {
  return static_cast<float*>(slots_.at(buffers_.at(buffer).slot).get());
}

float* CudaPreparedProgram::ViewAddress(const exec::View& view) const {
  const Shape& s = buffers_.at(view.buffer).shape;
  return BufferAddress(view.buffer) + int64_t{view.offset} * s.h * s.w;
}

void CudaPreparedProgram::CheckMemory(const exec::Program& program) {
  double needed = 0;
  for (int64_t elements : program.slot_elements) needed += 4.0 * elements * batch_;
  for (const exec::ConvWeights& w : program.weights) {
    needed += 4.0 * static_cast<double>(w.kernel.size() + w.bias.size());
  }
  for (const exec::ProgramStage& stage : program.stages) {
    for (const exec::Lane& lane : stage.lanes) {
      for (const exec::Step& step : lane.steps) {
        if (step.op.kind != OpKind::kConv) continue;
        needed += 4.0 * PaddedInputElements(step, buffers_.at(step.inputs.at(0).buffer), batch_);
      }
    }
  }
  size_t free_bytes = 0, total_bytes = 0;
  Checked(api_.MemoryInfo(free_bytes, total_bytes), "reading free memory");
  // What only the pool holds (the search's scratch, idle workspaces) is
  // given back before a program is refused for want of it.
  if (needed > static_cast<double>(free_bytes) && state_->pool->Trim()) {
    Checked(api_.MemoryInfo(free_bytes, total_bytes), "reading free memory");
  }
  if (needed > static_cast<double>(free_bytes)) {
    throw ExecError(MeasureError::kOutOfMemory,
                    "cuda: the program needs " + MiB(needed) +
                        " of storage, weights and padded inputs at batch " +
                        std::to_string(batch_) + ", the GPU has " + MiB(double(free_bytes)) +
                        " free of " + MiB(double(total_bytes)));
  }
}

void CudaPreparedProgram::UploadWeights(const exec::Program& program) {
  for (size_t i = 0; i < program.weights.size(); ++i) {
    const exec::ConvWeights& w = program.weights[i];
    Weights& uploaded = weights_.emplace_back();
    uploaded.kernel = Upload(w.kernel, "weights " + std::to_string(i));
    if (!w.bias.empty()) uploaded.bias = Upload(w.bias, "bias " + std::to_string(i));
  }
}

DeviceMemory CudaPreparedProgram::Upload(const std::vector<float>& values,
                                         const std::string& what) {
  const size_t bytes = values.size() * sizeof(float);
  DeviceMemory memory = Allocate(api_, bytes, what);
  Checked(api_.CopyToDevice(memory.get(), values.data(), bytes), "uploading " + what);
  return memory;
}

void CudaPreparedProgram::BorrowStreams(const exec::Program& program) {
  size_t lanes = 0;
  for (const exec::ProgramStage& stage : program.stages) {
    if (stage.lanes.size() > 1) lanes = std::max(lanes, stage.lanes.size());
  }
  DevicePool& pool = *state_->pool;
  pool.EnsureStreams(lanes + 1);  // a lost device: Prepare remembers it
  for (size_t i = 0; i <= lanes; ++i) {
    PooledStream& pooled = pool.StreamAt(i);
    StreamContext& context = contexts_.emplace_back();
    context.stream = pooled.stream.get();
    context.dnn = pooled.dnn.get();
    context.joined = pooled.joined.get();
  }
}

void CudaPreparedProgram::DecideFusion() {
  for (FusedConv& fused : fused_) {
    fused.runs = FusionRuns(state_->algorithms, fused.key, fused.run, fused.where);
  }
}

void CudaPreparedProgram::RunCalls(const std::vector<Call>& calls) {
  for (const Call& call : calls) {
    const cuda::Status status = call.run();
    if (!status.ok()) Checked(status, "step '" + *call.label + "'");
  }
}

void CudaPreparedProgram::Enqueue() { EnqueueStages(0, static_cast<int>(stages_.size())); }

void CudaPreparedProgram::EnqueueStages(int begin, int end) {
  if (begin < 0 || begin > end || end > static_cast<int>(stages_.size())) {
    throw Error("cuda: stages [" + std::to_string(begin) + ", " + std::to_string(end) +
                ") of a program of " + std::to_string(stages_.size()));
  }
  const cuda::Stream origin = Origin();
  for (int s = begin; s < end; ++s) {
    const CompiledStage& stage = stages_[static_cast<size_t>(s)];
    if (stage.lanes.size() == 1) {
      RunCalls(stage.lanes[0]);
      continue;
    }
    if (stage.lanes.empty()) continue;
    Checked(api_.RecordEvent(fork_, origin), "forking a stage");
    for (size_t l = 0; l < stage.lanes.size(); ++l) {
      const StreamContext& lane = contexts_[l + 1];
      Checked(api_.WaitEvent(lane.stream, fork_), "forking a stage");
      RunCalls(stage.lanes[l]);
      Checked(api_.RecordEvent(lane.joined, lane.stream), "joining a stage");
    }
    for (size_t l = 0; l < stage.lanes.size(); ++l) {
      Checked(api_.WaitEvent(origin, contexts_[l + 1].joined), "joining a stage");
    }
  }
}

double CudaPreparedProgram::Timed(const std::function<void()>& enqueue) {
  Checked(api_.RecordEvent(start_, Origin()), "starting the clock");
  enqueue();
  Checked(api_.RecordEvent(end_, Origin()), "stopping the clock");
  Checked(api_.SynchronizeEvent(end_), "waiting for the runs");
  float ms = 0;
  Checked(api_.ElapsedMs(start_, end_, ms), "reading the clock");
  return ms;
}

CudaPreparedProgram::Recorded CudaPreparedProgram::Capture(int copies) {
  Checked(api_.BeginCapture(Origin()), "starting the capture");
  try {
    // Back to back on the origin: each copy forks from and joins to it,
    // as consecutive stages of a network do.
    for (int copy = 0; copy < copies; ++copy) Enqueue();
  } catch (...) {
    cuda::Graph partial;
    (void)api_.EndCapture(Origin(), partial);
    if (partial) (void)api_.DestroyGraph(partial);
    throw;
  }
  Recorded recorded;
  cuda::Graph graph;
  const cuda::Status ended = api_.EndCapture(Origin(), graph);
  if (graph) recorded.graph = OwnedGraph(api_, graph);
  Checked(ended, "ending the capture");
  cuda::GraphExec exec;
  Checked(api_.InstantiateGraph(recorded.graph.get(), exec), "instantiating the captured graph");
  recorded.exec = OwnedGraphExec(api_, exec);
  return recorded;
}

}  // namespace ios::devices::cuda_detail
