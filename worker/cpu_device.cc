// The cpu device on oneDNN 2.x. A program's buffers are plain NCHW float32
// storage; a view is a channel range of one (strided at batch > 1).
// Convolutions ask oneDNN for its preferred layouts (format_tag::any) and
// reorder into and out of the plain views inside every run, so the timed
// region pays what a real run pays; weights are reordered once, at prepare.
// Pooling, activations, element-wise ops and copies work on the views
// directly. Every primitive uses scratchpad_mode::user with one scratchpad
// per executing thread, so it may run on any thread (docs/cpu-backend.md).
#include "worker/cpu_device.h"

#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <oneapi/dnnl/dnnl.hpp>
#include <sstream>
#include <unordered_map>
#include <utility>

#include "exec/program.h"
#include "worker/cpu_lanes.h"

namespace ios::worker {
namespace {

using dnnl::memory;
using exec::ExecError;
using Dims = memory::dims;
using Tag = memory::format_tag;
constexpr memory::data_type kF32 = memory::data_type::f32;
constexpr size_t kAlignment = 64;  // a cache line; enough for every ISA oneDNN uses

std::string FormatBytes(double bytes) {
  std::ostringstream out;
  out.precision(3);
  if (bytes >= double(1 << 30)) {
    out << bytes / double(1 << 30) << " GiB";
  } else if (bytes >= double(1 << 20)) {
    out << bytes / double(1 << 20) << " MiB";
  } else {
    out << static_cast<int64_t>(bytes) << " bytes";
  }
  return out.str();
}

int64_t PhysicalMemoryBytes() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page_size = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page_size <= 0) return int64_t{1} << 62;  // unknown: do not refuse
  return static_cast<int64_t>(pages) * page_size;
}

//! Bytes a prepared program will hold, checked against the machine's
//! physical memory before anything is allocated, so a stage that cannot fit
//! is an out-of-memory result instead of a swap storm or a killed worker.
class MemoryBudget {
 public:
  explicit MemoryBudget(int64_t limit) : limit_(limit) {}
  //! `bytes` < 0 stands for "overflows int64".
  void Reserve(int64_t bytes, const std::string& what) {
    if (bytes < 0 || bytes > limit_ - used_) {
      throw ExecError(MeasureError::kOutOfMemory,
                      "cpu: " + what + " needs " +
                          (bytes < 0 ? std::string("more than 2^63 bytes") : FormatBytes(bytes)) +
                          (used_ > 0 ? " beside " + FormatBytes(used_) + " already planned" : "") +
                          "; this machine has " + FormatBytes(limit_) + " of physical memory");
    }
    used_ += bytes;
  }

 private:
  int64_t limit_;
  int64_t used_ = 0;
};

//! a * b, or -1 when the product overflows (both >= 0).
int64_t CheckedProduct(int64_t a, int64_t b) {
  if (a != 0 && b > INT64_MAX / a) return -1;
  return a * b;
}

struct FreeDeleter {
  void operator()(float* p) const { std::free(p); }
};
using Storage = std::unique_ptr<float, FreeDeleter>;

//! Zeroed, aligned storage: touching it once here keeps page faults out of
//! the timed runs and makes unwritten buffers read as zeros.
Storage AllocateFloats(int64_t count, const std::string& what) {
  const size_t bytes =
      (static_cast<size_t>(std::max<int64_t>(count, 1)) * sizeof(float) + kAlignment - 1) /
      kAlignment * kAlignment;
  void* data = std::aligned_alloc(kAlignment, bytes);
  if (data == nullptr) {
    throw ExecError(MeasureError::kOutOfMemory,
                    "cpu: could not allocate " + FormatBytes(double(bytes)) + " for " + what);
  }
  std::memset(data, 0, bytes);
  return Storage(static_cast<float*>(data));
}

MeasureError KindOf(const dnnl::error& e) {
  switch (e.status) {
    case dnnl_unimplemented:
      return MeasureError::kUnsupported;
    case dnnl_out_of_memory:
      return MeasureError::kOutOfMemory;
    default:
      return MeasureError::kBackendFailure;
  }
}

[[noreturn]] void ThrowDnnl(const dnnl::error& e, const std::string& where) {
  throw ExecError(KindOf(e), "cpu: " + where + ": oneDNN: " + e.what() + " (status " +
                                 std::to_string(static_cast<int>(e.status)) + ")");
}

dnnl::algorithm EltwiseAlgorithm(Activation act) {
  switch (act) {
    case Activation::kRelu:
      return dnnl::algorithm::eltwise_relu;
    case Activation::kSigmoid:
      return dnnl::algorithm::eltwise_logistic;
    case Activation::kTanh:
      return dnnl::algorithm::eltwise_tanh;
    case Activation::kNone:
      break;
  }
  throw ExecError(MeasureError::kUnsupported, "cpu: no eltwise algorithm for activation none");
}

//! A memory descriptor for messages: dims, strides and inner blocks.
std::string DescribeDesc(const memory::desc& desc) {
  const dnnl_memory_desc_t& d = desc.data;
  std::string text = "dims";
  for (int i = 0; i < d.ndims; ++i) text += (i ? "x" : " ") + std::to_string(d.dims[i]);
  if (d.format_kind != dnnl_blocked) return text + " (not a blocked layout)";
  const dnnl_blocking_desc_t& blocking = d.format_desc.blocking;
  text += " strides";
  for (int i = 0; i < d.ndims; ++i) text += (i ? "," : " ") + std::to_string(blocking.strides[i]);
  for (int i = 0; i < blocking.inner_nblks; ++i) {
    text += " block" + std::to_string(blocking.inner_idxs[i]) + ":" +
            std::to_string(blocking.inner_blks[i]);
  }
  return text;
}

//! Sets the calling thread's OpenMP thread count for a scope, then restores it.
class OmpThreads {
 public:
  explicit OmpThreads(int threads) : previous_(omp_get_max_threads()) {
    omp_set_num_threads(threads);
  }
  ~OmpThreads() { omp_set_num_threads(previous_); }
  OmpThreads(const OmpThreads&) = delete;
  OmpThreads& operator=(const OmpThreads&) = delete;

 private:
  int previous_;
};

//! What one thread needs to run primitives: its stream and its scratchpad,
//! sized to the largest need of the primitives it runs.
struct Executor {
  explicit Executor(const dnnl::engine& engine) : stream(engine) {}
  dnnl::stream stream;
  size_t scratch_bytes = 0;
  std::vector<memory> scratch_users;  // bound to `scratch` once it exists
  Storage scratch;
};

struct Call {
  dnnl::primitive primitive;
  std::unordered_map<int, memory> args;
};

void RunCalls(std::vector<Call>& calls, Executor& executor) {
  try {
    for (Call& call : calls) call.primitive.execute(executor.stream, call.args);
    executor.stream.wait();
  } catch (const dnnl::error& e) {
    ThrowDnnl(e, "running a primitive");
  }
}

//! The thread of one lane of a stage with several lanes; lanes of stages
//! with the same lane count share their threads (lane i on thread i).
struct LaneWorker {
  LaneWorker(const dnnl::engine& engine, LaneShare share)
      : executor(engine), thread(std::move(share)) {}
  Executor executor;
  LaneThread thread;  // after `executor`: joined before it goes
};

struct CompiledStage {
  std::vector<std::vector<Call>> lanes;
  std::vector<LaneWorker*> workers;         // several lanes: lane i's thread
  std::vector<std::function<void()>> jobs;  // several lanes: lane i's run
};

//! Turns the steps of one lane into primitives. Runs on the thread that will
//! execute them, after its OpenMP thread count is set.
class LaneCompiler {
 public:
  LaneCompiler(const dnnl::engine& engine, const exec::Program& program,
               const std::vector<float*>& buffer_data, int batch, MemoryBudget& budget,
               Executor& executor)
      : engine_(engine),
        program_(program),
        buffer_data_(buffer_data),
        batch_(batch),
        budget_(budget),
        executor_(executor) {
    attr_.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  }

  std::vector<Call> Compile(const exec::Lane& lane, const std::string& where) {
    std::vector<Call> calls;
    for (size_t i = 0; i < lane.steps.size(); ++i) {
      const exec::Step& step = lane.steps[i];
      where_ = where + " step " + std::to_string(i) + " (" + step.label + ")";
      try {
        CompileStep(step, calls);
      } catch (const dnnl::error& e) {
        ThrowDnnl(e, where_ + ": " + doing_);
      }
    }
    return calls;
  }

 private:
  void CompileStep(const exec::Step& step, std::vector<Call>& calls) {
    switch (step.op.kind) {
      case OpKind::kConv:
        return Conv(step, calls);
      case OpKind::kPool:
        return Pool(step, calls);
      case OpKind::kActivation:
        return Activate(step, calls);
      case OpKind::kEltwise:
        return Combine(step,
                       step.op.eltwise == EltwiseType::kMul ? dnnl::algorithm::binary_mul
                                                            : dnnl::algorithm::binary_add,
                       calls);
      case OpKind::kIdentity:
        return Combine(step, dnnl::algorithm::binary_add, calls);
      case OpKind::kInput:
      case OpKind::kSequential:
        break;
    }
    throw ExecError(MeasureError::kUnsupported, "cpu: " + where_ + ": a program step cannot be " +
                                                    std::string(ToString(step.op.kind)));
  }

  const Shape& ShapeOf(const exec::View& view) const {
    return program_.buffers.at(view.buffer).shape;
  }

  //! The descriptor of a view in its buffer's NHWC storage: channels
  //! [offset, offset + channels) at every pixel, the pixel stride being the
  //! buffer's channel count. A view of a whole buffer is a dense nhwc tensor,
  //! the layout oneDNN's AVX-512 convolutions pick themselves.
  memory::desc ViewDesc(const exec::View& view) const {
    const Shape& s = ShapeOf(view);
    return memory::desc(Dims{batch_, view.channels, s.h, s.w}, kF32,
                        Dims{int64_t{s.c} * s.h * s.w, 1, int64_t{s.w} * s.c, s.c});
  }

  memory ViewMemory(const exec::View& view) const {
    return memory(ViewDesc(view), engine_, buffer_data_.at(view.buffer) + view.offset);
  }

  memory Allocate(const memory::desc& desc, const std::string& what) {
    budget_.Reserve(static_cast<int64_t>(desc.get_size()), where_ + ": " + what);
    doing_ = "allocating " + what;
    return memory(desc, engine_);
  }

  //! Appends a call of `primitive` (created from `pd`), with its share of
  //! the thread's scratchpad.
  void Add(std::vector<Call>& calls, const dnnl::primitive_desc_base& pd,
           const dnnl::primitive& primitive, std::unordered_map<int, memory> args) {
    const memory::desc scratch = pd.scratchpad_desc();
    if (scratch.get_size() > 0) {
      memory user(scratch, engine_, DNNL_MEMORY_NONE);
      args.emplace(DNNL_ARG_SCRATCHPAD, user);
      executor_.scratch_users.push_back(user);
      executor_.scratch_bytes = std::max(executor_.scratch_bytes, scratch.get_size());
    }
    calls.push_back(Call{primitive, std::move(args)});
  }

  //! A copy between layouts (or between views).
  void Copy(std::vector<Call>& calls, const memory& from, const memory& to) {
    doing_ = "reorder::primitive_desc from " + DescribeDesc(from.get_desc()) + " to " +
             DescribeDesc(to.get_desc());
    const dnnl::reorder::primitive_desc pd(engine_, from.get_desc(), engine_, to.get_desc(), attr_);
    doing_ = "creating a reorder";
    Add(calls, pd, dnnl::reorder(pd), {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}});
  }

  void Conv(const exec::Step& step, std::vector<Call>& calls) {
    const ConvParams& c = step.op.conv;
    const exec::View& in = step.inputs.at(0);
    const exec::View& out = step.output;
    const exec::ConvWeights& w = program_.weights.at(step.weights);
    const int groups = c.groups;
    if (w.out_channels != out.channels || int64_t{w.in_per_group} * groups != in.channels ||
        w.kernel_h != c.kernel.h || w.kernel_w != c.kernel.w ||
        w.kernel.size() != size_t(w.out_channels) * w.in_per_group * w.kernel_h * w.kernel_w ||
        (!w.bias.empty() && w.bias.size() != size_t(w.out_channels))) {
      throw ExecError(MeasureError::kBackendFailure,
                      "cpu: " + where_ + ": the weights do not fit the convolution");
    }
    const Shape& is = ShapeOf(in);
    const Shape& os = ShapeOf(out);
    const memory::desc src_any(Dims{batch_, in.channels, is.h, is.w}, kF32, Tag::any);
    const memory::desc dst_any(Dims{batch_, out.channels, os.h, os.w}, kF32, Tag::any);
    const Dims weight_dims =
        groups == 1 ? Dims{w.out_channels, w.in_per_group, w.kernel_h, w.kernel_w}
                    : Dims{groups, w.out_channels / groups, w.in_per_group, w.kernel_h, w.kernel_w};
    const memory::desc weights_any(weight_dims, kF32, Tag::any);
    const bool bias = !w.bias.empty();
    const memory::desc bias_desc =
        bias ? memory::desc(Dims{w.out_channels}, kF32, Tag::a) : memory::desc();
    // A fresh attribute: copies of dnnl::primitive_attr share one object.
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    if (c.act != Activation::kNone) {
      dnnl::post_ops ops;
      ops.append_eltwise(1.f, EltwiseAlgorithm(c.act), 0.f, 0.f);
      attr.set_post_ops(ops);
    }
    doing_ = "convolution_forward::primitive_desc";
    const dnnl::convolution_forward::desc desc(
        dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_auto, src_any, weights_any,
        bias_desc, dst_any, Dims{c.stride.h, c.stride.w}, Dims{c.dilation.h - 1, c.dilation.w - 1},
        Dims{c.padding.h, c.padding.w}, Dims{c.padding.h, c.padding.w});
    const dnnl::convolution_forward::primitive_desc pd(desc, attr, engine_);

    // Weights: reordered once, here, from OIHW (GOIHW when grouped: the
    // same values in the same order) into the layout the primitive wants.
    memory weights = Allocate(pd.weights_desc(), "convolution weights");
    {
      doing_ = "reordering the weights";
      memory user(memory::desc(weight_dims, kF32, groups == 1 ? Tag::oihw : Tag::goihw), engine_,
                  const_cast<float*>(w.kernel.data()));
      dnnl::reorder(user, weights).execute(executor_.stream, user, weights);
      executor_.stream.wait();
    }
    std::unordered_map<int, memory> args{{DNNL_ARG_WEIGHTS, weights}};
    if (bias) {
      memory bias_memory = Allocate(bias_desc, "convolution bias");
      std::memcpy(bias_memory.get_data_handle(), w.bias.data(), w.bias.size() * sizeof(float));
      args.emplace(DNNL_ARG_BIAS, bias_memory);
    }

    memory src = ViewMemory(in);
    if (pd.src_desc() != src.get_desc()) {
      memory plain = src;
      src = Allocate(pd.src_desc(), "the convolution input in oneDNN's layout");
      Copy(calls, plain, src);
    }
    const memory dst_view = ViewMemory(out);
    const bool direct = pd.dst_desc() == dst_view.get_desc();
    const memory dst =
        direct ? dst_view : Allocate(pd.dst_desc(), "the convolution output in oneDNN's layout");
    args.emplace(DNNL_ARG_SRC, src);
    args.emplace(DNNL_ARG_DST, dst);
    doing_ = "creating a convolution_forward";
    Add(calls, pd, dnnl::convolution_forward(pd), std::move(args));
    if (!direct) Copy(calls, dst, dst_view);
  }

  //! Whether a view is a whole buffer: a dense nhwc tensor.
  bool IsDense(const exec::View& view) const {
    return view.offset == 0 && view.channels == ShapeOf(view).c;
  }

  //! A view as a dense tensor for pooling, eltwise and binary primitives,
  //! which have only reference (slow) implementations for strided data: the
  //! view itself when it is a whole buffer, else a temporary the run fills
  //! from it with a (fast) reorder.
  memory DenseInput(std::vector<Call>& calls, const exec::View& view) {
    memory plain = ViewMemory(view);
    if (IsDense(view)) return plain;
    const Shape& s = ShapeOf(view);
    memory dense = Allocate(memory::desc(Dims{batch_, view.channels, s.h, s.w}, kF32, Tag::nhwc),
                            "a dense copy of a channel range");
    Copy(calls, plain, dense);
    return dense;
  }

  //! Where such a primitive writes a view: the view itself when it is a whole
  //! buffer, else a temporary that FinishOutput copies into the view.
  memory DenseOutput(const exec::View& view) {
    if (IsDense(view)) return ViewMemory(view);
    const Shape& s = ShapeOf(view);
    return Allocate(memory::desc(Dims{batch_, view.channels, s.h, s.w}, kF32, Tag::nhwc),
                    "a dense result for a channel range");
  }

  void FinishOutput(std::vector<Call>& calls, const exec::View& view, const memory& written) {
    if (!IsDense(view)) Copy(calls, written, ViewMemory(view));
  }

  void Pool(const exec::Step& step, std::vector<Call>& calls) {
    const PoolParams& p = step.op.pool;
    const exec::View& in = step.inputs.at(0);
    const Shape& is = ShapeOf(in);
    const bool global = p.type == PoolType::kGlobalMax || p.type == PoolType::kGlobalAvg;
    const bool max = p.type == PoolType::kMax || p.type == PoolType::kGlobalMax;
    // IOS's average pooling divides by the whole window, padding included.
    const dnnl::algorithm algorithm =
        max ? dnnl::algorithm::pooling_max : dnnl::algorithm::pooling_avg_include_padding;
    const Dims kernel = global ? Dims{is.h, is.w} : Dims{p.kernel.h, p.kernel.w};
    const Dims strides = global ? Dims{1, 1} : Dims{p.stride.h, p.stride.w};
    const Dims padding = global ? Dims{0, 0} : Dims{p.padding.h, p.padding.w};
    const memory src = DenseInput(calls, in);
    const memory dst = DenseOutput(step.output);
    doing_ = "pooling_forward::primitive_desc";
    const dnnl::pooling_forward::desc desc(dnnl::prop_kind::forward_inference, algorithm,
                                           src.get_desc(), dst.get_desc(), strides, kernel, padding,
                                           padding);
    const dnnl::pooling_forward::primitive_desc pd(desc, attr_, engine_);
    doing_ = "creating a pooling_forward";
    Add(calls, pd, dnnl::pooling_forward(pd), {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}});
    FinishOutput(calls, step.output, dst);
  }

  void Activate(const exec::Step& step, std::vector<Call>& calls) {
    if (step.op.act == Activation::kNone) {
      return Copy(calls, ViewMemory(step.inputs.at(0)), ViewMemory(step.output));
    }
    // Both dense and of equal dims: one descriptor serves source and
    // destination, as oneDNN 2.x's eltwise requires.
    const memory src = DenseInput(calls, step.inputs.at(0));
    const memory dst = DenseOutput(step.output);
    doing_ = "eltwise_forward::primitive_desc";
    const dnnl::eltwise_forward::desc desc(dnnl::prop_kind::forward_inference,
                                           EltwiseAlgorithm(step.op.act), dst.get_desc(), 0.f, 0.f);
    const dnnl::eltwise_forward::primitive_desc pd(desc, attr_, engine_);
    doing_ = "creating an eltwise_forward";
    Add(calls, pd, dnnl::eltwise_forward(pd), {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}});
    FinishOutput(calls, step.output, dst);
  }

  //! out = in0 (op) in1 (op) ... as a chain of binary primitives, the later
  //! ones in place on the output; one input is a copy.
  void Combine(const exec::Step& step, dnnl::algorithm algorithm, std::vector<Call>& calls) {
    if (step.inputs.size() == 1) {
      return Copy(calls, ViewMemory(step.inputs[0]), ViewMemory(step.output));
    }
    const memory dst = DenseOutput(step.output);
    const memory first = DenseInput(calls, step.inputs[0]);
    for (size_t i = 1; i < step.inputs.size(); ++i) {
      const memory src0 = i == 1 ? first : dst;
      const memory src1 = DenseInput(calls, step.inputs[i]);
      doing_ = "binary::primitive_desc";
      const dnnl::binary::desc desc(algorithm, src0.get_desc(), src1.get_desc(), dst.get_desc());
      const dnnl::binary::primitive_desc pd(desc, attr_, engine_);
      doing_ = "creating a binary";
      Add(calls, pd, dnnl::binary(pd),
          {{DNNL_ARG_SRC_0, src0}, {DNNL_ARG_SRC_1, src1}, {DNNL_ARG_DST, dst}});
    }
    FinishOutput(calls, step.output, dst);
  }

  const dnnl::engine& engine_;
  const exec::Program& program_;
  const std::vector<float*>& buffer_data_;
  int64_t batch_;
  MemoryBudget& budget_;
  Executor& executor_;
  dnnl::primitive_attr attr_;
  std::string where_, doing_;
};

class CpuPreparedProgram : public exec::PreparedProgram {
 public:
  CpuPreparedProgram(const dnnl::engine& engine, int threads, const std::vector<int>& cpus,
                     const exec::Program& program, int batch, MemoryBudget& budget)
      : engine_(engine),
        threads_(threads),
        cpus_(cpus),
        batch_(batch),
        buffers_(program.buffers),
        main_(engine) {
    for (size_t slot = 0; slot < program.slot_elements.size(); ++slot) {
      slots_.push_back(AllocateFloats(program.slot_elements[slot] * batch,
                                      "storage slot " + std::to_string(slot)));
    }
    for (const exec::BufferDesc& buffer : buffers_) {
      if (buffer.slot < 0 || buffer.slot >= static_cast<int>(slots_.size())) {
        throw ExecError(MeasureError::kBackendFailure,
                        "cpu: buffer '" + buffer.label + "' names slot " +
                            std::to_string(buffer.slot) + " of " + std::to_string(slots_.size()));
      }
      buffer_data_.push_back(slots_[buffer.slot].get());
    }
    Compile(program, budget);
  }

  void Write(int buffer, std::span<const float> values) override {
    const int64_t count = BufferElements(buffer);
    if (static_cast<int64_t>(values.size()) != count) {
      throw Error("cpu: Write of buffer " + std::to_string(buffer) + " ('" +
                  buffers_[buffer].label + "'): " + std::to_string(values.size()) +
                  " values given, " + std::to_string(count) + " expected");
    }
    // NCHW values into NHWC storage.
    const Shape& s = buffers_[buffer].shape;
    const int64_t plane = int64_t{s.h} * s.w;
    float* to = buffer_data_[buffer];
    for (int64_t n = 0; n < batch_; ++n) {
      for (int64_t c = 0; c < s.c; ++c) {
        const float* from = values.data() + (n * s.c + c) * plane;
        for (int64_t p = 0; p < plane; ++p) to[(n * plane + p) * s.c + c] = from[p];
      }
    }
  }

  std::vector<float> Read(const exec::View& view) override {
    BufferElements(view.buffer);  // checks the index
    const Shape& s = buffers_[view.buffer].shape;
    if (view.offset < 0 || view.channels < 0 || view.offset + view.channels > s.c) {
      throw Error("cpu: Read of channels [" + std::to_string(view.offset) + ", " +
                  std::to_string(view.offset + view.channels) + ") of buffer '" +
                  buffers_[view.buffer].label + "' with " + std::to_string(s.c) + " channels");
    }
    // NHWC storage out as NCHW values.
    const int64_t plane = int64_t{s.h} * s.w;
    std::vector<float> values(static_cast<size_t>(batch_ * view.channels * plane));
    const float* from = buffer_data_[view.buffer] + view.offset;
    for (int64_t n = 0; n < batch_; ++n) {
      for (int64_t c = 0; c < view.channels; ++c) {
        float* to = values.data() + (n * view.channels + c) * plane;
        for (int64_t p = 0; p < plane; ++p) to[p] = from[(n * plane + p) * s.c + c];
      }
    }
    return values;
  }

  double TimedRuns(int runs) override {
    const OmpThreads omp(threads_);
    const auto start = std::chrono::steady_clock::now();
    for (int run = 0; run < runs; ++run) {
      for (CompiledStage& stage : stages_) RunStage(stage);
    }
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
        .count();
  }

 private:
  int64_t BufferElements(int buffer) const {
    if (buffer < 0 || buffer >= static_cast<int>(buffers_.size())) {
      throw Error("cpu: no buffer " + std::to_string(buffer) + " (the program has " +
                  std::to_string(buffers_.size()) + ")");
    }
    const Shape& s = buffers_[buffer].shape;
    return batch_ * s.c * s.h * s.w;
  }

  void RunStage(CompiledStage& stage) {
    if (stage.workers.empty()) {
      for (std::vector<Call>& lane : stage.lanes) RunCalls(lane, main_);
      return;
    }
    for (size_t i = 0; i < stage.workers.size(); ++i) stage.workers[i]->thread.Post(stage.jobs[i]);
    std::exception_ptr first;
    for (LaneWorker* worker : stage.workers) {
      try {
        worker->thread.Wait();
      } catch (...) {
        if (!first) first = std::current_exception();
      }
    }
    if (first) std::rethrow_exception(first);
  }

  //! The threads of stages with `lanes` lanes, created on first use.
  std::vector<std::unique_ptr<LaneWorker>>& Crew(int lanes) {
    auto& crew = crews_[lanes];
    if (crew.empty()) {
      for (LaneShare& share : SplitCores(threads_, cpus_, lanes)) {
        crew.push_back(std::make_unique<LaneWorker>(engine_, std::move(share)));
      }
    }
    return crew;
  }

  void Compile(const exec::Program& program, MemoryBudget& budget) {
    const OmpThreads omp(threads_);
    for (size_t s = 0; s < program.stages.size(); ++s) {
      const exec::ProgramStage& stage = program.stages[s];
      CompiledStage compiled;
      const int lanes = static_cast<int>(stage.lanes.size());
      const std::string where = "stage " + std::to_string(s);
      if (lanes <= 1) {
        for (const exec::Lane& lane : stage.lanes) {
          LaneCompiler compiler(engine_, program, buffer_data_, batch_, budget, main_);
          compiled.lanes.push_back(compiler.Compile(lane, where + " lane 0"));
        }
      } else {
        auto& crew = Crew(lanes);
        compiled.lanes.resize(lanes);
        for (int i = 0; i < lanes; ++i) {
          // On the lane's own thread, one lane at a time (the budget is
          // not shared between threads).
          LaneWorker& worker = *crew[i];
          const std::function<void()> job = [&, i] {
            LaneCompiler compiler(engine_, program, buffer_data_, batch_, budget, worker.executor);
            compiled.lanes[i] =
                compiler.Compile(stage.lanes[i], where + " lane " + std::to_string(i));
          };
          worker.thread.Post(job);
          worker.thread.Wait();
          compiled.workers.push_back(&worker);
        }
      }
      stages_.push_back(std::move(compiled));
    }
    // Jobs point into stages_, which no longer moves.
    for (CompiledStage& stage : stages_) {
      for (size_t i = 0; i < stage.workers.size(); ++i) {
        stage.jobs.push_back([calls = &stage.lanes[i], executor = &stage.workers[i]->executor] {
          RunCalls(*calls, *executor);
        });
      }
    }
    // Scratchpads, one per executing thread, sized for its largest need.
    std::vector<Executor*> executors{&main_};
    for (auto& [lanes, crew] : crews_) {
      for (auto& worker : crew) executors.push_back(&worker->executor);
    }
    for (Executor* executor : executors) {
      if (executor->scratch_bytes == 0) continue;
      budget.Reserve(static_cast<int64_t>(executor->scratch_bytes), "a scratchpad");
      executor->scratch = AllocateFloats(
          static_cast<int64_t>((executor->scratch_bytes + sizeof(float) - 1) / sizeof(float)),
          "a scratchpad");
      for (memory& user : executor->scratch_users) user.set_data_handle(executor->scratch.get());
    }
  }

  dnnl::engine engine_;
  int threads_;
  std::vector<int> cpus_;
  int64_t batch_;
  std::vector<exec::BufferDesc> buffers_;
  std::vector<Storage> slots_;
  std::vector<float*> buffer_data_;
  Executor main_;
  std::map<int, std::vector<std::unique_ptr<LaneWorker>>> crews_;
  std::vector<CompiledStage> stages_;  // after crews_: gone before the threads
};

std::string CpuModel() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (!line.starts_with("model name")) continue;
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string model = line.substr(colon + 1);
    model.erase(0, model.find_first_not_of(" \t"));
    model.erase(model.find_last_not_of(" \t") + 1);
    if (!model.empty()) return model;
  }
  return "unknown cpu";
}

std::string IsaName(dnnl::cpu_isa isa) {
  switch (isa) {
    case dnnl::cpu_isa::all:
      return "all";
    case dnnl::cpu_isa::sse41:
      return "sse41";
    case dnnl::cpu_isa::avx:
      return "avx";
    case dnnl::cpu_isa::avx2:
      return "avx2";
    case dnnl::cpu_isa::avx2_vnni:
      return "avx2_vnni";
    case dnnl::cpu_isa::avx512_mic:
      return "avx512_mic";
    case dnnl::cpu_isa::avx512_mic_4ops:
      return "avx512_mic_4ops";
    case dnnl::cpu_isa::avx512_core:
      return "avx512_core";
    case dnnl::cpu_isa::avx512_core_vnni:
      return "avx512_core_vnni";
    case dnnl::cpu_isa::avx512_core_bf16:
      return "avx512_core_bf16";
    case dnnl::cpu_isa::avx512_core_amx:
      return "avx512_core_amx";
  }
  return "isa" + std::to_string(static_cast<int>(isa));
}

class CpuDevice : public exec::Device {
 public:
  explicit CpuDevice(const CpuOptions& options) : cpus_(AllowedCpus()) {
    if (options.threads < 0) throw Error("cpu: threads must be >= 1 (0: every core)");
    threads_ = options.threads > 0 ? options.threads : static_cast<int>(cpus_.size());
    try {
      engine_ = dnnl::engine(dnnl::engine::kind::cpu, 0);
    } catch (const dnnl::error& e) {
      ThrowDnnl(e, "creating the cpu engine");
    }
    const dnnl_version_t* version = dnnl_version();
    const std::string model = CpuModel();
    const int cores = std::min(threads_, static_cast<int>(cpus_.size()));
    info_.backend = "cpu";
    info_.name = "cpu:" + model;
    info_.fingerprint = "cpu|model=" + model + "|isa=" + IsaName(dnnl::get_effective_cpu_isa()) +
                        "|cores=" + std::to_string(cores) + "|threads=" + std::to_string(threads_) +
                        "|onednn=" + std::to_string(version->major) + "." +
                        std::to_string(version->minor) + "." + std::to_string(version->patch) +
                        "|fp32";
    info_.simulated = false;
  }

  const DeviceInfo& Info() const override { return info_; }

  std::unique_ptr<exec::PreparedProgram> Prepare(const exec::Program& program, int batch) override {
    if (batch < 1) throw ExecError(MeasureError::kUnsupported, "cpu: batch size must be >= 1");
    try {
      exec::Validate(program);
    } catch (const Error& e) {
      throw ExecError(MeasureError::kBackendFailure,
                      std::string("cpu: the program is not well formed: ") + e.what());
    }
    MemoryBudget budget(PhysicalMemoryBytes());
    // Activation storage and weights first: an absurd batch size fails here,
    // before oneDNN is asked for anything of that size.
    int64_t activation = 0;
    for (int64_t elements : program.slot_elements) {
      const int64_t bytes = CheckedProduct(CheckedProduct(elements, batch), sizeof(float));
      activation = bytes < 0 || activation > INT64_MAX - bytes ? -1 : activation + bytes;
      if (activation < 0) break;
    }
    budget.Reserve(activation, "the activations at batch " + std::to_string(batch));
    try {
      return std::make_unique<CpuPreparedProgram>(engine_, threads_, cpus_, program, batch, budget);
    } catch (const dnnl::error& e) {
      ThrowDnnl(e, "preparing the program");
    } catch (const std::bad_alloc&) {
      throw ExecError(MeasureError::kOutOfMemory, "cpu: out of memory preparing the program");
    }
  }

 private:
  std::vector<int> cpus_;
  int threads_ = 1;
  dnnl::engine engine_;
  DeviceInfo info_;
};

}  // namespace

std::unique_ptr<exec::Device> MakeCpuDevice(const CpuOptions& options) {
  return std::make_unique<CpuDevice>(options);
}

CpuOptions ParseCpuOptions(const std::string& name) {
  const std::string grammar = "the grammar is cpu or cpu,threads=N (N >= 1)";
  if (name == "cpu") return {};
  if (name == "cpu,") throw Error("backend 'cpu,': an option is missing; " + grammar);
  if (!name.starts_with("cpu,")) throw Error("backend '" + name + "': " + grammar);
  CpuOptions options;
  std::stringstream rest(name.substr(4));
  std::string option;
  while (std::getline(rest, option, ',')) {
    const size_t equals = option.find('=');
    const std::string key = option.substr(0, equals);
    const std::string value = equals == std::string::npos ? "" : option.substr(equals + 1);
    if (key != "threads") {
      throw Error("backend '" + name + "': unknown option '" + key + "'; " + grammar);
    }
    int threads = 0;
    const auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), threads);
    if (error != std::errc() || end != value.data() + value.size() || threads < 1 ||
        threads > 4096) {
      throw Error("backend '" + name + "': threads must be a whole number from 1 to 4096, not '" +
                  value + "'");
    }
    options.threads = threads;
  }
  return options;
}

}  // namespace ios::worker
