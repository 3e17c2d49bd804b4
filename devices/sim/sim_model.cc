// The simulated GPU's performance model. docs/simulator.md gives the
// formulas with a worked example; every constant (sim_internal.h) appears
// there and in the device fingerprint.
//
// Pipeline of one Measure(): resolve each op's inputs to shapes, turn every
// op into kernels (FLOPs, DRAM bytes, thread blocks), turn each kernel into a
// standalone time and an SM demand with a roofline, replay the stage's
// streams in an event simulation in which concurrent kernels share the SMs,
// then apply the measurement protocol (optionally with seeded noise; that
// last step is sim_backend.cc's).
#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "common/error.h"
#include "common/op_kinds.h"
#include "common/slices.h"
#include "devices/sim/sim_internal.h"

namespace ios::devices::sim_detail {
namespace {

double Elements(const Shape& s) { return static_cast<double>(s.c) * s.h * s.w; }

}  // namespace

double BlockCapacity(const SimGpuSpec& gpu) { return gpu.sm_count * kBlocksPerSm; }

namespace {

// ---- Inputs -----------------------------------------------------------------

//! What an op reads, per sample: the shape of each term, and how much data
//! its slices hold and how many additions summing them takes.
struct OpInput {
  std::vector<Shape> terms;
  double read_elements = 0;
  double sum_flops = 0;
  bool sums_slices = false;
};

//! Op `op_index` of group `group`'s input, resolved as everywhere else
//! (common/slices.h).
OpInput ResolveInputs(const StageSpec& spec, size_t group, size_t op_index) {
  try {
    const ResolvedInput in = ResolveStageInput(spec, group, op_index);
    return OpInput{in.TermShapes(), in.elements_read, in.sum_additions, in.sums_slices};
  } catch (const InputError& e) {
    throw Error("sim: groups[" + std::to_string(group) + "].ops[" + std::to_string(op_index) +
                "]." + e.what());
  }
}

//! The input of the next element of a kSequential chain: one plain tensor.
OpInput PlainInput(const Shape& shape) { return OpInput{{shape}, Elements(shape), 0, false}; }

// ---- Ops to kernel work -----------------------------------------------------

//! Reads, writes and the output footprint shared by every kernel kind.
void AddTraffic(KernelWork& work, const OpInput& in, const Shape& out, double batch) {
  work.output_bytes = kBytesPerValue * batch * Elements(out);
  work.bytes = kBytesPerValue * batch * in.read_elements + work.weight_bytes + work.output_bytes;
}

double ElementwiseBlocks(double elements) {
  return std::max(1.0, std::ceil(elements / kThreadsPerBlock));
}

KernelWork ConvWork(const ConvParams& conv, const OpInput& in, const Shape& out,
                    const WorkContext& ctx) {
  const double batch = ctx.batch;
  const Shape x = InputShape(in.terms, "sim conv");
  const int groups = std::max(1, conv.groups);
  const double cin_per_group = static_cast<double>(x.c) / groups;
  const double taps = static_cast<double>(conv.kernel.h) * conv.kernel.w;
  const double out_elements = batch * Elements(out);
  const double epilogue = (conv.bias ? 1 : 0) + (conv.act != Activation::kNone ? 1 : 0);
  KernelWork work;
  work.flops =
      2 * out_elements * cin_per_group * taps + epilogue * out_elements + batch * in.sum_flops;
  work.weight_bytes = kBytesPerValue * (out.c * cin_per_group * taps + (conv.bias ? out.c : 0));
  AddTraffic(work, in, out, batch);
  if (groups > 1 && cin_per_group < kDepthwiseMaxChannels) {
    // Depthwise-like: too little reduction per output for a GEMM; cuDNN runs
    // a direct kernel, one output per thread, usually memory bound.
    work.efficiency = kDepthwiseEfficiency;
    work.blocks = ElementwiseBlocks(out_elements);
    return work;
  }
  // Implicit GEMM: M = output pixels, N = output channels per group, one
  // kConvTile x kConvTile output tile per block. When the tiles cannot fill
  // the GPU, libraries split the reduction (split-K) to get more blocks, as
  // far as the reduction is long enough.
  const double pixel_tiles = std::ceil(batch * out.h * out.w / kConvTile);
  const double channel_tiles = std::ceil(static_cast<double>(out.c) / groups / kConvTile);
  const double tiles = std::max(1.0, pixel_tiles * channel_tiles * groups);
  const double split_k = std::max(1.0, std::min(std::floor(cin_per_group * taps / kSplitKChunk),
                                                std::ceil(ctx.capacity / tiles)));
  work.efficiency = kConvEfficiency;
  work.blocks = tiles * split_k;
  // An unrolled (im2col) input for kernels larger than 1x1, capped the way a
  // framework caps cuDNN's workspace.
  if (taps > 1) {
    work.workspace_bytes = std::min(
        kBytesPerValue * batch * out.h * out.w * cin_per_group * groups * taps, kMaxWorkspaceBytes);
  }
  return work;
}

KernelWork PoolWork(const PoolParams& pool, const OpInput& in, const Shape& out, double batch) {
  const Shape x = InputShape(in.terms, "sim pool");
  const bool global = pool.type == PoolType::kGlobalMax || pool.type == PoolType::kGlobalAvg;
  const double taps =
      global ? static_cast<double>(x.h) * x.w : static_cast<double>(pool.kernel.h) * pool.kernel.w;
  const double out_elements = batch * Elements(out);
  KernelWork work;
  work.flops = out_elements * taps + batch * in.sum_flops;
  work.blocks = global ? std::max(1.0, std::ceil(batch * out.c / kPlanesPerBlock))
                       : ElementwiseBlocks(out_elements);
  AddTraffic(work, in, out, batch);
  return work;
}

//! Activation, eltwise and summing identity: a few flops per output element.
KernelWork ElementwiseWork(double flops_per_element, const OpInput& in, const Shape& out,
                           double batch) {
  const double out_elements = batch * Elements(out);
  KernelWork work;
  work.flops = flops_per_element * out_elements + batch * in.sum_flops;
  work.blocks = ElementwiseBlocks(out_elements);
  AddTraffic(work, in, out, batch);
  return work;
}

KernelWork IdentityWork(const OpInput& in, const Shape& out, double batch) {
  // Without slices to sum, an identity only renames (terms concatenate for
  // free in the IOS model); the runtime still launches a kernel for it.
  if (!in.sums_slices) return KernelWork{.no_op = true};
  return ElementwiseWork(0, in, out, batch);
}

//! Appends the kernels of `op` (reading `in`, producing `out`) to `kernels`.
void AppendOpWork(const OpParams& op, const OpInput& in, const Shape& out, const WorkContext& ctx,
                  std::vector<KernelWork>& kernels) {
  const double batch = ctx.batch;
  switch (op.kind) {
    case OpKind::kConv:
      kernels.push_back(ConvWork(op.conv, in, out, ctx));
      return;
    case OpKind::kPool:
      kernels.push_back(PoolWork(op.pool, in, out, batch));
      return;
    case OpKind::kActivation:
      kernels.push_back(ElementwiseWork(1, in, out, batch));
      return;
    case OpKind::kEltwise:
      kernels.push_back(ElementwiseWork(static_cast<double>(in.terms.size()) - 1, in, out, batch));
      return;
    case OpKind::kIdentity:
      kernels.push_back(IdentityWork(in, out, batch));
      return;
    case OpKind::kRegistered: {
      const OpKindSpec& spec = SpecOf(op.registered.kind);
      KernelWork work = ElementwiseWork(spec.sim_flops_per_element, in, out, batch);
      if (spec.sim_flops != nullptr) {
        Shape input = in.terms.at(0);
        for (size_t t = 1; t < in.terms.size(); ++t) input.c += in.terms[t].c;
        work.flops += batch * spec.sim_flops(op.registered, input);
      }
      kernels.push_back(work);
      return;
    }
    case OpKind::kSequential: {
      // One kernel per chain element on the same stream; each reads the
      // previous output. The last element produces the op's declared output.
      OpInput step_in = in;
      for (size_t k = 0; k < op.chain.size(); ++k) {
        const Shape step_out =
            k + 1 == op.chain.size() ? out : InferOpOutput(op.chain[k], step_in.terms, "sim chain");
        AppendOpWork(op.chain[k], step_in, step_out, ctx, kernels);
        step_in = PlainInput(step_out);
      }
      return;
    }
    case OpKind::kInput:
      break;
  }
  throw Error(std::string("sim: cannot run an op of kind ") + ToString(op.kind));
}

// ---- Stage plan ---------------------------------------------------------------

double MemoryBytes(const StageSpec& spec, const StagePlan& plan, double batch) {
  double bytes = 0;
  for (const Shape& external : spec.externals) bytes += kBytesPerValue * batch * Elements(external);
  for (const std::vector<KernelWork>& stream : plan.streams) {
    double workspace = 0;  // a stream's kernels run one at a time and share it
    for (const KernelWork& k : stream) {
      bytes += k.output_bytes + k.weight_bytes;
      workspace = std::max(workspace, k.workspace_bytes);
    }
    bytes += workspace;
  }
  return bytes;
}

//! kMerge: one convolution with all the stage's convs stacked along output
//! channels (however they are grouped), reading the first op's input; the
//! split of its output into the ops' outputs is free.
std::vector<KernelWork> MergedWork(const StageSpec& spec, const WorkContext& ctx) {
  std::vector<ConvParams> convs;
  int out_channels = 0;
  for (const std::vector<StageOp>& group : spec.groups) {
    for (const StageOp& op : group) {
      if (op.op.kind != OpKind::kConv) throw Error("sim: a merge stage holds convolutions only");
      convs.push_back(op.op.conv);
      out_channels += op.output.c;
    }
  }
  const StageOp& first = spec.groups.front().front();
  const Shape out{out_channels, first.output.h, first.output.w};
  const OpInput in = ResolveInputs(spec, 0, 0);
  return {ConvWork(MergedConv(convs), in, out, ctx)};
}

}  // namespace

StagePlan PlanStage(const StageSpec& spec, const WorkContext& ctx) {
  if (spec.groups.empty()) throw Error("sim: the stage has no operators");
  StagePlan plan;
  if (spec.strategy == Strategy::kMerge) {
    plan.streams.push_back(MergedWork(spec, ctx));
  } else {
    for (size_t g = 0; g < spec.groups.size(); ++g) {
      const std::vector<StageOp>& group = spec.groups[g];
      std::vector<KernelWork>& stream = plan.streams.emplace_back();
      for (size_t i = 0; i < group.size(); ++i) {
        AppendOpWork(group[i].op, ResolveInputs(spec, g, i), group[i].output, ctx, stream);
      }
    }
  }
  plan.memory_bytes = MemoryBytes(spec, plan, ctx.batch);
  return plan;
}

namespace {

// ---- Kernel timing ------------------------------------------------------------

//! A kernel's standalone execution time and the share of the GPU it fills.
struct Kernel {
  double exec_us = 0;
  double demand = 1;  // in (0, 1]
};

Kernel TimeKernel(const KernelWork& work, const SimGpuSpec& gpu) {
  const double capacity = BlockCapacity(gpu);
  if (work.no_op) return Kernel{0, 1 / capacity};
  // Fewer blocks than the SMs hold leave SMs idle: throughput scales down.
  const double demand = std::min(1.0, std::max(1.0, work.blocks) / capacity);
  const double flops_per_us = gpu.peak_tflops * 1e6 * work.efficiency;
  const double bytes_per_us = gpu.bandwidth_gbs * 1e3 * kBandwidthEfficiency;
  const double full_gpu_us = std::max(work.flops / flops_per_us, work.bytes / bytes_per_us);
  return Kernel{full_gpu_us / demand, demand};
}

// ---- Stream simulation --------------------------------------------------------

//! Progress rates of running kernels in full-GPU microseconds per microsecond.
//! Kernels that fit together run at standalone speed; oversubscribed SMs are
//! shared in proportion to demand and lose a little more to interference
//! (cache and scheduler contention), which is why two large kernels run
//! concurrently take longer than run one after the other.
std::vector<double> Rates(const std::vector<double>& demands) {
  double total = 0;
  for (double d : demands) total += d;
  const double slowdown = total <= 1 ? 1 : total * (1 + kInterference * std::min(1.0, total - 1));
  std::vector<double> rates;
  rates.reserve(demands.size());
  for (double d : demands) rates.push_back(d / slowdown);
  return rates;
}

//! Replays one stage: each stream runs its kernels in order; one host thread
//! launches them (launch_us each, one at a time, lowest stream first), and a
//! kernel is launched once its stream predecessor has finished. Returns the
//! time the last kernel ends, in microseconds.
class StreamSimulator {
 public:
  StreamSimulator(const std::vector<std::vector<Kernel>>& streams, double launch_us)
      : streams_(streams),
        launch_us_(launch_us),
        next_(streams.size(), 0),
        busy_(streams.size(), false) {}

  double Run() {
    for (;;) {
      if (launching_ < 0) StartLaunch();
      if (launching_ < 0 && running_.empty()) return now_;
      Advance();
    }
  }

 private:
  struct Running {
    size_t stream;
    double remaining;  // full-GPU microseconds of work left
    double demand;
  };

  void StartLaunch() {
    for (size_t s = 0; s < streams_.size(); ++s) {
      if (!busy_[s] && next_[s] < streams_[s].size()) {
        launching_ = static_cast<int>(s);
        busy_[s] = true;
        launch_end_ = now_ + launch_us_;
        return;
      }
    }
  }

  //! Moves time to the next event (a launch completes or a kernel finishes).
  void Advance() {
    std::vector<double> demands;
    for (const Running& r : running_) demands.push_back(r.demand);
    const std::vector<double> rates = Rates(demands);
    double step = launching_ >= 0 ? launch_end_ - now_ : std::numeric_limits<double>::infinity();
    for (size_t i = 0; i < running_.size(); ++i) {
      step = std::min(step, running_[i].remaining / rates[i]);
    }
    const double tolerance = step * 1e-12;
    std::vector<Running> still_running;
    for (size_t i = 0; i < running_.size(); ++i) {
      Running r = running_[i];
      if (r.remaining / rates[i] <= step + tolerance) {
        busy_[r.stream] = false;
      } else {
        r.remaining -= rates[i] * step;
        still_running.push_back(r);
      }
    }
    running_ = std::move(still_running);
    const bool launched = launching_ >= 0 && launch_end_ - now_ <= step + tolerance;
    now_ = launched ? launch_end_ : now_ + step;
    if (launched) FinishLaunch();
  }

  void FinishLaunch() {
    const size_t s = static_cast<size_t>(launching_);
    const Kernel& kernel = streams_[s][next_[s]++];
    launching_ = -1;
    if (kernel.exec_us <= 0) {
      busy_[s] = false;  // nothing to execute: done as soon as launched
      return;
    }
    running_.push_back(Running{s, kernel.exec_us * kernel.demand, kernel.demand});
  }

  const std::vector<std::vector<Kernel>>& streams_;
  const double launch_us_;
  std::vector<size_t> next_;  // next kernel to launch, per stream
  std::vector<bool> busy_;    // a kernel of this stream is launching or running
  std::vector<Running> running_;
  int launching_ = -1;  // stream whose kernel the host is launching
  double launch_end_ = 0;
  double now_ = 0;
};

}  // namespace

double FullGpuMicroseconds(const StagePlan& plan, const SimGpuSpec& gpu) {
  double work = 0;
  for (const std::vector<KernelWork>& stream : plan.streams) {
    for (const KernelWork& kernel : stream) {
      const Kernel timed = TimeKernel(kernel, gpu);
      work += timed.exec_us * timed.demand;
    }
  }
  return work;
}

double StageMicroseconds(const StagePlan& plan, const SimGpuSpec& gpu) {
  std::vector<std::vector<Kernel>> streams;
  for (const std::vector<KernelWork>& stream : plan.streams) {
    std::vector<Kernel>& timed = streams.emplace_back();
    for (const KernelWork& work : stream) timed.push_back(TimeKernel(work, gpu));
  }
  return StreamSimulator(streams, gpu.launch_us).Run() + kStageSyncUs;
}

std::string ModelFingerprint(const SimGpuSpec& gpu) {
  std::ostringstream fp;
  fp.precision(12);  // enough digits that any change of a figure shows
  fp << "sim-model-v" << kModelVersion << "|gpu=" << gpu.name << "|sm=" << gpu.sm_count
     << "|fp32_tflops=" << gpu.peak_tflops << "|dram_gbs=" << gpu.bandwidth_gbs
     << "|launch_us=" << gpu.launch_us << "|memory_gib=" << gpu.memory_gib
     << "|bytes_per_value=" << kBytesPerValue << "|conv_eff=" << kConvEfficiency
     << "|dw_eff=" << kDepthwiseEfficiency << "|elt_eff=" << kElementwiseEfficiency
     << "|bw_eff=" << kBandwidthEfficiency << "|threads_per_block=" << kThreadsPerBlock
     << "|conv_tile=" << kConvTile << "|split_k_chunk=" << kSplitKChunk
     << "|planes_per_block=" << kPlanesPerBlock << "|blocks_per_sm=" << kBlocksPerSm
     << "|dw_max_channels=" << kDepthwiseMaxChannels << "|interference=" << kInterference
     << "|stage_sync_us=" << kStageSyncUs
     << "|max_workspace_mib=" << kMaxWorkspaceBytes / (1 << 20);
  return fp.str();
}

}  // namespace ios::devices::sim_detail
