// The recording fake's bookkeeping, and its machine, memory, stream, event,
// graph and cuDNN-object calls; the work it is asked to enqueue (and the
// shapes it checks) is recording_api_work.cc.
#include "tests/devices/cuda/recording_api.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <tuple>
#include <utility>

namespace ios::cuda::testing {

int Journal::Live(const std::string& kind) const {
  int count = 0;
  for (const auto& [object, object_kind] : live) count += object_kind == kind;
  return count;
}

namespace {

std::shared_ptr<FakeMachine> MachineOf(Journal& journal) {
  if (!journal.machine) journal.machine = std::make_shared<FakeMachine>();
  return journal.machine;
}

std::string Gpu(int device) { return "GPU " + std::to_string(device); }

}  // namespace

RecordingApi::RecordingApi(std::shared_ptr<Journal> journal)
    : journal_(std::move(journal)), machine_(MachineOf(*journal_)) {}

void RecordingApi::Trace(const std::string& call, void* stream, void* event, const void* reads,
                         const void* writes) {
  journal_->timeline.push_back({call, stream, event, current_device_, reads, writes});
}

const Allocation* RecordingApi::AllocationOf(const void* pointer) const {
  const auto address = reinterpret_cast<uintptr_t>(pointer);
  auto it = memory_.upper_bound(address);
  if (it == memory_.begin()) return nullptr;
  --it;
  return address < it->first + it->second.bytes ? &it->second : nullptr;
}

Status RecordingApi::Enter(const std::string& call, bool countable) {
  journal_->calls.push_back(call);
  if (!countable) return Ok();
  const bool injected = ++journal_->counted_calls == journal_->fail_at;
  const auto answer = journal_->answers.find(call);
  if (!injected && answer == journal_->answers.end()) return Ok();
  // A failed call inside a timed region ends the region as far as the
  // device can tell (it throws); a capture stays open until EndCapture.
  if (timed_) timed_ = false;
  if (capturing_) capture_failed_ = true;
  if (!injected) return {answer->second, call, "recorded answer"};
  journal_->injected = call;
  return {journal_->fail_code, call, "injected failure"};
}

void RecordingApi::Violation(const std::string& text) { journal_->violations.push_back(text); }

void* RecordingApi::NewObject(const std::string& kind) {
  void* object = reinterpret_cast<void*>(next_object_);
  next_object_ += 16;
  journal_->live[object] = kind;
  return object;
}

Status RecordingApi::Destroy(void* object, const std::string& kind, const std::string& call) {
  Enter(call, false);
  OutsideRegions(call);
  const auto it = journal_->live.find(object);
  if (it == journal_->live.end() || it->second != kind) {
    Violation(call + " of a " + kind + " that is not alive (destroyed twice, or never created)");
    return {Code::kFailure, call, "not alive"};
  }
  journal_->live.erase(it);
  return Ok();
}

void RecordingApi::Use(void* object, const std::string& kind, const std::string& call) {
  const auto it = journal_->live.find(object);
  if (it == journal_->live.end() || it->second != kind) {
    Violation(call + " uses a " + kind + " that is not alive");
  }
}

void RecordingApi::OutsideRegions(const std::string& call) {
  if (timed_ || capturing_) Violation(call + " inside a " + region_);
}

void RecordingApi::OpenRegion(void* origin, const std::string& what) {
  region_origin_ = origin;
  region_ = what;
  for (auto& [stream, state] : streams_) {
    state.in_region = stream == origin;
    state.joined_at = state.work;
  }
}

void RecordingApi::CloseRegion(const std::string& what) {
  const std::map<void*, int64_t>& known = streams_[region_origin_].knows;
  for (auto& [stream, state] : streams_) {
    const auto through = known.find(stream);
    const int64_t joined =
        std::max(state.joined_at, through == known.end() ? int64_t{0} : through->second);
    if (stream != region_origin_ && joined < state.work) {
      Violation("a stream that worked in the " + what +
                " still has work the origin stream did not wait for when it ended");
    }
    state.in_region = false;
  }
  region_origin_ = nullptr;
}

void RecordingApi::Work(void* stream, const std::string& call) {
  Use(stream, "stream", call);
  StreamState& state = streams_[stream];
  if (state.device != current_device_) {
    Violation(call + " on a stream of " + Gpu(state.device) + " while " + Gpu(current_device_) +
              " is current");
  }
  if ((timed_ || capturing_) && !state.in_region) {
    Violation(call + " on a stream that was not forked from the origin in this " + region_);
  }
  ++state.work;
}

void* RecordingApi::StreamOf(DnnHandle handle, const std::string& call) {
  Use(handle.value, "cudnn handle", call);
  const auto it = dnn_stream_.find(handle.value);
  if (it == dnn_stream_.end()) {
    Violation(call + " on a cuDNN handle bound to no stream");
    return nullptr;
  }
  return it->second;
}

void RecordingApi::Span(const void* pointer, size_t bytes, const std::string& call) {
  const auto address = reinterpret_cast<uintptr_t>(pointer);
  auto it = memory_.upper_bound(address);
  if (it == memory_.begin()) {
    Violation(call + ": a pointer outside every live allocation");
    return;
  }
  --it;
  if (address + bytes > it->first + it->second.bytes) {
    Violation(call + ": " + std::to_string(bytes) + " bytes at offset " +
              std::to_string(address - it->first) + " run past an allocation of " +
              std::to_string(it->second.bytes));
  }
}

void RecordingApi::Extent(const void* pointer, TensorDesc desc, const std::string& call) {
  Use(desc.value, "tensor", call);
  const auto it = tensors_.find(desc.value);
  if (it == tensors_.end()) return;
  const TensorLayout& t = it->second;
  const int64_t last = (t.n - 1) * t.stride_n + (t.c - 1) * t.stride_c + (t.h - 1) * t.stride_h +
                       (t.w - 1) * t.stride_w;
  Span(pointer, static_cast<size_t>(last + 1) * sizeof(float), call);
}

Status RecordingApi::Op(const std::string& call, DnnHandle handle, int algo, const void* reads,
                        const void* writes) {
  if (Status s = Enter(call); !s.ok()) return s;
  NotComputed(call);
  void* stream = StreamOf(handle, call);
  if (stream != nullptr) Work(stream, call);
  journal_->ops.push_back({call, handle.value, stream, algo});
  Trace(call, stream, nullptr, reads, writes);
  return Ok();
}

// ---- The machine -------------------------------------------------------------

Status RecordingApi::DeviceCount(int& count) {
  if (Status s = Enter("cudaGetDeviceCount"); !s.ok()) return s;
  if (journal_->device_count_error != Code::kOk) {
    return {journal_->device_count_error, "cudaGetDeviceCount", "no driver (recorded)"};
  }
  count = journal_->devices;
  return Ok();
}

Status RecordingApi::Properties(int device, DeviceProperties& out) {
  if (Status s = Enter("cudaGetDeviceProperties"); !s.ok()) return s;
  out = {"Recorded GPU " + std::to_string(device), 8, 0, 108, int64_t{40} << 30, 1410000, 1215000};
  return Ok();
}

Status RecordingApi::GetVersions(Versions& out) {
  if (Status s = Enter("versions"); !s.ok()) return s;
  out = {13000, 13000, 91900};
  return Ok();
}

Status RecordingApi::SetDevice(int device) {
  if (Status s = Enter("cudaSetDevice"); !s.ok()) return s;
  if (device < 0 || device >= journal_->devices) Violation("cudaSetDevice of a missing GPU");
  current_device_ = device;
  return Ok();
}

Status RecordingApi::MemoryInfo(size_t& free_bytes, size_t& total_bytes) {
  if (Status s = Enter("cudaMemGetInfo"); !s.ok()) return s;
  free_bytes = journal_->free_bytes;
  total_bytes = journal_->total_bytes;
  return Ok();
}

bool RecordingApi::ClocksLocked(int) {
  Enter("nvml clocks", false);
  return journal_->clocks_locked;
}

// ---- Memory --------------------------------------------------------------------

Status RecordingApi::Malloc(size_t bytes, void*& pointer) {
  pointer = nullptr;
  if (Status s = Enter("cudaMalloc"); !s.ok()) return s;
  OutsideRegions("cudaMalloc");
  if (journal_->largest_allocation > 0 && bytes > journal_->largest_allocation) {
    return {Code::kOutOfMemory, "cudaMalloc", "out of memory (recorded)"};
  }
  pointer = reinterpret_cast<void*>(next_address_);
  memory_[next_address_] = {bytes, current_device_, {}};
  if (journal_->compute) memory_[next_address_].held.resize(bytes);
  journal_->live_bytes += static_cast<int64_t>(bytes);
  journal_->live[pointer] = "memory";
  next_address_ += (bytes + 4095) / 4096 * 4096 + 4096;  // a gap between allocations
  return Ok();
}

Status RecordingApi::Free(void* pointer) {
  const Status status = Destroy(pointer, "memory", "cudaFree");
  if (status.ok()) {
    const auto it = memory_.find(reinterpret_cast<uintptr_t>(pointer));
    journal_->live_bytes -= static_cast<int64_t>(it->second.bytes);
    memory_.erase(it);
  }
  return status;
}

Status RecordingApi::CopyToDevice(void* device, const void* host, size_t bytes) {
  if (Status s = Enter("cudaMemcpy(host to device)"); !s.ok()) return s;
  OutsideRegions("cudaMemcpy(host to device)");
  Span(device, bytes, "cudaMemcpy(host to device)");
  if (unsigned char* held = Held(device, bytes)) std::memcpy(held, host, bytes);
  return Ok();
}

Status RecordingApi::CopyToHost(void* host, const void* device, size_t bytes) {
  if (Status s = Enter("cudaMemcpy(device to host)"); !s.ok()) return s;
  OutsideRegions("cudaMemcpy(device to host)");
  Span(device, bytes, "cudaMemcpy(device to host)");
  if (const unsigned char* held = Held(device, bytes)) {
    std::memcpy(host, held, bytes);
    return Ok();
  }
  // Deterministic contents, so reads are checked for their layout only.
  auto* values = static_cast<float*>(host);
  for (size_t i = 0; i < bytes / sizeof(float); ++i) values[i] = static_cast<float>(i);
  return Ok();
}

Status RecordingApi::CanAccessPeer(int device, int peer, bool& can) {
  can = false;
  if (Status s = Enter("cudaDeviceCanAccessPeer"); !s.ok()) return s;
  if (device < 0 || device >= journal_->devices || peer < 0 || peer >= journal_->devices) {
    Violation("cudaDeviceCanAccessPeer of a missing GPU");
  }
  can = device != peer && journal_->no_peer_access.count({device, peer}) == 0;
  return Ok();
}

Status RecordingApi::EnablePeerAccess(int peer) {
  if (Status s = Enter("cudaDeviceEnablePeerAccess"); !s.ok()) return s;
  journal_->peer_enabled.emplace_back(current_device_, peer);
  if (peer == current_device_ || journal_->no_peer_access.count({current_device_, peer}) != 0) {
    Violation("cudaDeviceEnablePeerAccess from " + Gpu(current_device_) + " to " + Gpu(peer) +
              ", which cannot access it");
    return {Code::kFailure, "cudaDeviceEnablePeerAccess", "peer access unsupported (recorded)"};
  }
  return Ok();
}

Status RecordingApi::CopyPeerAsync(void* dst, int dst_device, const void* src, int src_device,
                                   size_t bytes, Stream stream) {
  const std::string call = "cudaMemcpyPeerAsync";
  if (Status s = Enter(call); !s.ok()) return s;
  Span(dst, bytes, call + " (destination)");
  Span(src, bytes, call + " (source)");
  NotComputed(call);
  for (const auto& [pointer, device, what] :
       {std::tuple{static_cast<const void*>(dst), dst_device, "destination"},
        std::tuple{src, src_device, "source"}}) {
    const Allocation* a = AllocationOf(pointer);
    if (a != nullptr && a->device != device) {
      Violation(call + ": the " + what + " is memory of " + Gpu(a->device) + ", not of " +
                Gpu(device));
    }
  }
  Work(stream.value, call);
  Trace(call, stream.value, nullptr, src, dst);
  journal_->peer_copies.push_back({dst, dst_device, src, src_device, bytes, stream.value});
  return Ok();
}

// ---- Streams, events, graphs ---------------------------------------------------

Status RecordingApi::CreateStream(Stream& stream) {
  if (Status s = Enter("cudaStreamCreateWithFlags"); !s.ok()) return s;
  OutsideRegions("cudaStreamCreateWithFlags");
  stream.value = NewObject("stream");
  streams_[stream.value] = {};
  streams_[stream.value].device = current_device_;
  return Ok();
}

Status RecordingApi::DestroyStream(Stream stream) {
  const Status status = Destroy(stream.value, "stream", "cudaStreamDestroy");
  if (status.ok()) streams_.erase(stream.value);
  return status;
}

Status RecordingApi::CreateEvent(Event& event, bool timing) {
  if (Status s = Enter("cudaEventCreateWithFlags"); !s.ok()) return s;
  OutsideRegions("cudaEventCreateWithFlags");
  event.value = NewObject("event");
  events_[event.value] = {timing, false, nullptr, 0, current_device_, {}};
  return Ok();
}

Status RecordingApi::DestroyEvent(Event event) {
  const Status status = Destroy(event.value, "event", "cudaEventDestroy");
  if (status.ok()) events_.erase(event.value);
  return status;
}

Status RecordingApi::RecordEvent(Event event, Stream stream) {
  if (Status s = Enter("cudaEventRecord"); !s.ok()) return s;
  Use(event.value, "event", "cudaEventRecord");
  Use(stream.value, "stream", "cudaEventRecord");
  EventState& e = events_[event.value];
  Trace("cudaEventRecord", stream.value, event.value);
  if (e.timing && capturing_) Violation("a timing event recorded inside a capture");
  // A timing event opens a timed region; the next one on its origin closes it.
  const bool opens = e.timing && !timed_ && !capturing_;
  const bool closes = e.timing && timed_ && stream.value == region_origin_;
  StreamState& state = streams_[stream.value];
  if (!opens && !closes && (timed_ || capturing_) && !state.in_region) {
    Violation("cudaEventRecord on a stream that was not forked from the origin in this " + region_);
  }
  if (e.device != state.device) {
    Violation("cudaEventRecord of an event of " + Gpu(e.device) + " on a stream of " +
              Gpu(state.device));
  }
  e.recorded = true;
  e.stream = stream.value;
  e.work = state.work;
  e.knows = state.knows;
  if (opens) {
    timed_ = true;
    OpenRegion(stream.value, "timed region");
  }
  if (closes) {
    timed_ = false;
    CloseRegion("timed region");
  }
  return Ok();
}

Status RecordingApi::WaitEvent(Stream stream, Event event) {
  if (Status s = Enter("cudaStreamWaitEvent"); !s.ok()) return s;
  Use(event.value, "event", "cudaStreamWaitEvent");
  Trace("cudaStreamWaitEvent", stream.value, event.value);
  const EventState& e = events_[event.value];
  if (!e.recorded) Violation("a stream waits on an event that was never recorded");
  StreamState& waiter = streams_[stream.value];
  if (e.recorded && e.stream != stream.value) {
    int64_t& direct = waiter.knows[e.stream];
    direct = std::max(direct, e.work);
    for (const auto& [other, work] : e.knows) {
      if (other == stream.value) continue;
      int64_t& through = waiter.knows[other];
      through = std::max(through, work);
    }
  }
  Use(stream.value, "stream", "cudaStreamWaitEvent");
  if ((timed_ || capturing_) && e.stream != nullptr && streams_[e.stream].in_region) {
    waiter.in_region = true;  // forked (or joined) through the event
  }
  if (stream.value == region_origin_ || region_origin_ == nullptr) {
    StreamState& source = streams_[e.stream];
    source.joined_at = std::max(source.joined_at, e.work);
  }
  if (timed_ || capturing_) Work(stream.value, "cudaStreamWaitEvent");
  return Ok();
}

Status RecordingApi::SynchronizeEvent(Event event) {
  if (Status s = Enter("cudaEventSynchronize"); !s.ok()) return s;
  Use(event.value, "event", "cudaEventSynchronize");
  OutsideRegions("cudaEventSynchronize");
  return Ok();
}

Status RecordingApi::SynchronizeStream(Stream stream) {
  Enter("cudaStreamSynchronize", false);
  OutsideRegions("cudaStreamSynchronize");
  Use(stream.value, "stream", "cudaStreamSynchronize");
  return Ok();
}

Status RecordingApi::ElapsedMs(Event start, Event end, float& ms) {
  if (Status s = Enter("cudaEventElapsedTime"); !s.ok()) return s;
  Use(start.value, "event", "cudaEventElapsedTime");
  Use(end.value, "event", "cudaEventElapsedTime");
  if (!events_[start.value].timing || !events_[end.value].timing) {
    Violation("cudaEventElapsedTime between events created without timing");
  }
  ms = journal_->elapsed_ms;
  return Ok();
}

Status RecordingApi::BeginCapture(Stream stream) {
  if (Status s = Enter("cudaStreamBeginCapture"); !s.ok()) return s;
  OutsideRegions("cudaStreamBeginCapture");
  Use(stream.value, "stream", "cudaStreamBeginCapture");
  capturing_ = true;
  OpenRegion(stream.value, "capture");
  return Ok();
}

Status RecordingApi::EndCapture(Stream stream, Graph& graph) {
  graph = {};
  const Status entered = Enter("cudaStreamEndCapture");
  if (!capturing_) Violation("cudaStreamEndCapture without a capture");
  if (stream.value != region_origin_) Violation("cudaStreamEndCapture on another stream");
  // A capture that met a failure is ended to be thrown away: CUDA reports
  // it unjoined or invalidated, and that is all right.
  if (capturing_ && !capture_failed_) CloseRegion("capture");
  capturing_ = false;
  capture_failed_ = false;
  region_origin_ = nullptr;
  if (!entered.ok()) return entered;
  graph.value = NewObject("graph");
  return Ok();
}

Status RecordingApi::InstantiateGraph(Graph graph, GraphExec& exec) {
  if (Status s = Enter("cudaGraphInstantiateWithFlags"); !s.ok()) return s;
  OutsideRegions("cudaGraphInstantiateWithFlags");
  Use(graph.value, "graph", "cudaGraphInstantiateWithFlags");
  exec.value = NewObject("graph exec");
  return Ok();
}

Status RecordingApi::LaunchGraph(GraphExec exec, Stream stream) {
  if (Status s = Enter("cudaGraphLaunch"); !s.ok()) return s;
  Use(exec.value, "graph exec", "cudaGraphLaunch");
  if (capturing_) Violation("cudaGraphLaunch inside a capture");
  NotComputed("cudaGraphLaunch");
  Work(stream.value, "cudaGraphLaunch");
  Trace("cudaGraphLaunch", stream.value);
  ++journal_->launches;
  return Ok();
}

Status RecordingApi::DestroyGraph(Graph graph) {
  return Destroy(graph.value, "graph", "cudaGraphDestroy");
}

Status RecordingApi::DestroyGraphExec(GraphExec exec) {
  return Destroy(exec.value, "graph exec", "cudaGraphExecDestroy");
}

// ---- cuDNN objects -------------------------------------------------------------

Status RecordingApi::CreateDnn(DnnHandle& handle) {
  if (Status s = Enter("cudnnCreate"); !s.ok()) return s;
  OutsideRegions("cudnnCreate");
  handle.value = NewObject("cudnn handle");
  return Ok();
}

Status RecordingApi::DestroyDnn(DnnHandle handle) {
  const Status status = Destroy(handle.value, "cudnn handle", "cudnnDestroy");
  if (status.ok()) dnn_stream_.erase(handle.value);
  return status;
}

Status RecordingApi::SetDnnStream(DnnHandle handle, Stream stream) {
  if (Status s = Enter("cudnnSetStream"); !s.ok()) return s;
  OutsideRegions("cudnnSetStream");
  Use(handle.value, "cudnn handle", "cudnnSetStream");
  Use(stream.value, "stream", "cudnnSetStream");
  dnn_stream_[handle.value] = stream.value;
  return Ok();
}

Status RecordingApi::CreateTensor(const TensorLayout& layout, TensorDesc& desc) {
  if (Status s = Enter("cudnnCreateTensorDescriptor"); !s.ok()) return s;
  OutsideRegions("cudnnCreateTensorDescriptor");
  if (layout.n < 1 || layout.c < 1 || layout.h < 1 || layout.w < 1) {
    Violation("a tensor with an empty dimension");
  }
  desc.value = NewObject("tensor");
  tensors_[desc.value] = layout;
  return Ok();
}

Status RecordingApi::DestroyTensor(TensorDesc desc) {
  return Destroy(desc.value, "tensor", "cudnnDestroyTensorDescriptor");
}

Status RecordingApi::CreateFilter(int k, int c, int r, int s, FilterDesc& desc) {
  if (Status st = Enter("cudnnCreateFilterDescriptor"); !st.ok()) return st;
  OutsideRegions("cudnnCreateFilterDescriptor");
  desc.value = NewObject("filter");
  filters_[desc.value] = {k, c, r, s};
  return Ok();
}

Status RecordingApi::DestroyFilter(FilterDesc desc) {
  return Destroy(desc.value, "filter", "cudnnDestroyFilterDescriptor");
}

Status RecordingApi::CreateConvolution(const ConvGeometry& geometry, ConvDesc& desc) {
  if (Status s = Enter("cudnnCreateConvolutionDescriptor"); !s.ok()) return s;
  OutsideRegions("cudnnCreateConvolutionDescriptor");
  desc.value = NewObject("convolution");
  convs_[desc.value] = geometry;
  return Ok();
}

Status RecordingApi::SetConvolutionMath(ConvDesc desc, MathType math) {
  if (Status s = Enter("cudnnSetConvolutionMathType"); !s.ok()) return s;
  OutsideRegions("cudnnSetConvolutionMathType");
  Use(desc.value, "convolution", "cudnnSetConvolutionMathType");
  convs_[desc.value].math = math;
  return Ok();
}

Status RecordingApi::DestroyConvolution(ConvDesc desc) {
  return Destroy(desc.value, "convolution", "cudnnDestroyConvolutionDescriptor");
}

Status RecordingApi::CreateActivation(ActivationMode, ActivationDesc& desc) {
  if (Status s = Enter("cudnnCreateActivationDescriptor"); !s.ok()) return s;
  OutsideRegions("cudnnCreateActivationDescriptor");
  desc.value = NewObject("activation");
  return Ok();
}

Status RecordingApi::DestroyActivation(ActivationDesc desc) {
  return Destroy(desc.value, "activation", "cudnnDestroyActivationDescriptor");
}

Status RecordingApi::CreatePooling(PoolingMode mode, int window_h, int window_w, int pad_h,
                                   int pad_w, int stride_h, int stride_w, PoolingDesc& desc) {
  if (Status s = Enter("cudnnCreatePoolingDescriptor"); !s.ok()) return s;
  OutsideRegions("cudnnCreatePoolingDescriptor");
  desc.value = NewObject("pooling");
  pools_[desc.value] = {window_h, window_w, pad_h, pad_w, stride_h, stride_w};
  journal_->pooling_modes.push_back(mode);
  return Ok();
}

Status RecordingApi::DestroyPooling(PoolingDesc desc) {
  return Destroy(desc.value, "pooling", "cudnnDestroyPoolingDescriptor");
}

Status RecordingApi::CreateOpTensor(OpTensorOp, OpTensorDesc& desc) {
  if (Status s = Enter("cudnnCreateOpTensorDescriptor"); !s.ok()) return s;
  OutsideRegions("cudnnCreateOpTensorDescriptor");
  desc.value = NewObject("op tensor");
  return Ok();
}

Status RecordingApi::DestroyOpTensor(OpTensorDesc desc) {
  return Destroy(desc.value, "op tensor", "cudnnDestroyOpTensorDescriptor");
}

}  // namespace ios::cuda::testing
