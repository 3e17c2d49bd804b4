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
  CreateStreams(program);
  {
    AlgorithmSearch search(api_, state_->options, state_->algorithms);
    Compile(program, search);
    // The search's scratch is not needed to run: given back before the
    // workspaces the chosen algorithms need are allocated.
    search.Finish();
  }
  for (StreamContext& context : contexts_) {
    if (context.workspace_needed == 0) continue;
    context.workspace = Allocate(api_, context.workspace_needed, "a convolution workspace");
    context.workspace_bytes = context.workspace_needed;
  }
  DecideFusion();
  fork_ = NewEvent(false);
  start_ = NewEvent(true);
  end_ = NewEvent(true);
}

CudaPreparedProgram::~CudaPreparedProgram() {
  // Work still in flight (a run that failed half-way) ends before its
  // memory goes.
  for (StreamContext& context : contexts_) (void)api_.SynchronizeStream(context.stream.get());
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
  if (!graph_exec_.get()) Capture();
  return Timed([&] {
    for (int run = 0; run < runs; ++run) {
      Checked(api_.LaunchGraph(graph_exec_.get(), Origin()), "replaying the program");
    }
  });
}

void CudaPreparedProgram::SynchronizeAll() {
  for (StreamContext& context : contexts_) {
    Checked(api_.SynchronizeStream(context.stream.get()), "waiting for the program's streams");
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
  size_t free_bytes = 0, total_bytes = 0;
  Checked(api_.MemoryInfo(free_bytes, total_bytes), "reading free memory");
  if (needed > static_cast<double>(free_bytes)) {
    throw ExecError(MeasureError::kOutOfMemory,
                    "cuda: the program needs " + MiB(needed) + " of storage and weights at batch " +
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

OwnedEvent CudaPreparedProgram::NewEvent(bool timing) {
  cuda::Event event;
  Checked(api_.CreateEvent(event, timing), "creating an event");
  return {api_, event};
}

void CudaPreparedProgram::CreateStreams(const exec::Program& program) {
  size_t lanes = 0;
  for (const exec::ProgramStage& stage : program.stages) {
    if (stage.lanes.size() > 1) lanes = std::max(lanes, stage.lanes.size());
  }
  for (size_t i = 0; i <= lanes; ++i) {
    StreamContext& context = contexts_.emplace_back();
    cuda::Stream stream;
    Checked(api_.CreateStream(stream), "creating stream " + std::to_string(i));
    context.stream = {api_, stream};
    cuda::DnnHandle dnn;
    Checked(api_.CreateDnn(dnn), "creating the cuDNN handle of stream " + std::to_string(i));
    context.dnn = {api_, dnn};
    Checked(api_.SetDnnStream(dnn, stream), "binding a cuDNN handle to its stream");
    if (i > 0) context.joined = NewEvent(false);
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

void CudaPreparedProgram::Enqueue() {
  const cuda::Stream origin = Origin();
  for (const CompiledStage& stage : stages_) {
    if (stage.lanes.size() == 1) {
      RunCalls(stage.lanes[0]);
      continue;
    }
    if (stage.lanes.empty()) continue;
    Checked(api_.RecordEvent(fork_.get(), origin), "forking a stage");
    for (size_t l = 0; l < stage.lanes.size(); ++l) {
      const StreamContext& lane = contexts_[l + 1];
      Checked(api_.WaitEvent(lane.stream.get(), fork_.get()), "forking a stage");
      RunCalls(stage.lanes[l]);
      Checked(api_.RecordEvent(lane.joined.get(), lane.stream.get()), "joining a stage");
    }
    for (size_t l = 0; l < stage.lanes.size(); ++l) {
      Checked(api_.WaitEvent(origin, contexts_[l + 1].joined.get()), "joining a stage");
    }
  }
}

double CudaPreparedProgram::Timed(const std::function<void()>& enqueue) {
  Checked(api_.RecordEvent(start_.get(), Origin()), "starting the clock");
  enqueue();
  Checked(api_.RecordEvent(end_.get(), Origin()), "stopping the clock");
  Checked(api_.SynchronizeEvent(end_.get()), "waiting for the runs");
  float ms = 0;
  Checked(api_.ElapsedMs(start_.get(), end_.get(), ms), "reading the clock");
  return ms;
}

void CudaPreparedProgram::Capture() {
  Checked(api_.BeginCapture(Origin()), "starting the capture");
  try {
    Enqueue();
  } catch (...) {
    cuda::Graph partial;
    (void)api_.EndCapture(Origin(), partial);
    if (partial) (void)api_.DestroyGraph(partial);
    throw;
  }
  cuda::Graph graph;
  const cuda::Status ended = api_.EndCapture(Origin(), graph);
  if (graph) graph_ = OwnedGraph(api_, graph);
  Checked(ended, "ending the capture");
  cuda::GraphExec exec;
  Checked(api_.InstantiateGraph(graph_.get(), exec), "instantiating the captured graph");
  graph_exec_ = OwnedGraphExec(api_, exec);
}

}  // namespace ios::devices::cuda_detail
