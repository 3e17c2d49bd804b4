// The naive reference device: plain loops over NCHW storage, one thread, no
// library. Written for obviousness, not speed: it is the oracle.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <new>

#include "common/activation.h"
#include "common/op_kinds.h"
#include "exec/device.h"

namespace ios::exec {
namespace {

// The most activation + weight bytes the reference device will allocate:
// the machine's physical memory (a program beyond it could only thrash).
int64_t MemoryBound() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page_size = sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page_size <= 0) return int64_t{1} << 34;  // unknown: 16 GiB
  int64_t bytes = 0;
  if (__builtin_mul_overflow(static_cast<int64_t>(pages), static_cast<int64_t>(page_size),
                             &bytes)) {
    return std::numeric_limits<int64_t>::max();
  }
  return bytes;
}

int64_t WeightBytes(const Program& program) {
  int64_t total = 0;
  for (const ConvWeights& w : program.weights) {
    const auto bytes = static_cast<int64_t>((w.kernel.size() + w.bias.size()) * sizeof(float));
    if (__builtin_add_overflow(total, bytes, &total)) return std::numeric_limits<int64_t>::max();
  }
  return total;
}

float Activate(Activation act, float x) { return KindOf(act).apply(x); }

class ReferenceProgram : public PreparedProgram {
 public:
  ReferenceProgram(Program program, int batch) : program_(std::move(program)), batch_(batch) {
    storage_.reserve(program_.slot_elements.size());
    for (int64_t elements : program_.slot_elements) {
      storage_.emplace_back(static_cast<size_t>(elements * batch_), 0.0f);
    }
  }

  void Write(int buffer, std::span<const float> values) override {
    if (buffer < 0 || buffer >= static_cast<int>(program_.buffers.size())) {
      throw Error("reference device: Write: buffer " + std::to_string(buffer) + " out of range");
    }
    const Shape& s = program_.buffers[static_cast<size_t>(buffer)].shape;
    const View whole{buffer, 0, s.c};
    const size_t expected = static_cast<size_t>(batch_) * s.c * s.h * s.w;
    if (values.size() != expected) {
      throw Error("reference device: Write: buffer " + std::to_string(buffer) + " takes " +
                  std::to_string(expected) + " values, got " + std::to_string(values.size()));
    }
    const size_t plane = static_cast<size_t>(s.c) * s.h * s.w;
    for (int n = 0; n < batch_; ++n) {
      std::copy_n(values.data() + n * plane, plane, At(whole, n));
    }
  }

  std::vector<float> Read(const View& view) override {
    if (view.buffer < 0 || view.buffer >= static_cast<int>(program_.buffers.size()) ||
        view.offset < 0 || view.channels < 1 ||
        view.offset + view.channels > program_.buffers[static_cast<size_t>(view.buffer)].shape.c) {
      throw Error("reference device: Read: view outside buffer " + std::to_string(view.buffer));
    }
    const size_t plane = Plane(view) * static_cast<size_t>(view.channels);
    std::vector<float> out(plane * static_cast<size_t>(batch_));
    for (int n = 0; n < batch_; ++n) std::copy_n(At(view, n), plane, out.data() + n * plane);
    return out;
  }

  double TimedRuns(int runs) override {
    const auto start = std::chrono::steady_clock::now();
    for (int r = 0; r < runs; ++r) RunStages(0, static_cast<int>(program_.stages.size()));
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
        .count();
  }

  void RunStages(int begin, int end) override {
    if (begin < 0 || begin > end || end > static_cast<int>(program_.stages.size())) {
      throw Error("reference device: RunStages: [" + std::to_string(begin) + ", " +
                  std::to_string(end) + ") is not a range of the program's " +
                  std::to_string(program_.stages.size()) + " stages");
    }
    for (int s = begin; s < end; ++s) {
      for (const Lane& lane : program_.stages[static_cast<size_t>(s)].lanes) {
        for (const Step& step : lane.steps) RunStep(step);
      }
    }
  }

 private:
  const Shape& BufferShape(const View& v) const {
    return program_.buffers[static_cast<size_t>(v.buffer)].shape;
  }
  size_t Plane(const View& v) const {
    const Shape& s = BufferShape(v);
    return static_cast<size_t>(s.h) * s.w;
  }
  // First value of sample n of a view; its channels follow, Plane() apart.
  float* At(const View& v, int n) {
    const BufferDesc& b = program_.buffers[static_cast<size_t>(v.buffer)];
    const size_t plane = Plane(v);
    return storage_[static_cast<size_t>(b.slot)].data() +
           static_cast<size_t>(n) * b.shape.c * plane + static_cast<size_t>(v.offset) * plane;
  }

  void RunStep(const Step& step) {
    switch (step.op.kind) {
      case OpKind::kConv:
        return Conv(step);
      case OpKind::kPool:
        return Pool(step);
      case OpKind::kActivation:
      case OpKind::kEltwise:
      case OpKind::kIdentity:
        return Pointwise(step);
      case OpKind::kRegistered:
        return Registered(step);
      case OpKind::kInput:
      case OpKind::kSequential:
        break;
    }
    throw ExecError(MeasureError::kUnsupported,
                    "reference device: step " + step.label + ": not an operation");
  }

  void Conv(const Step& step) {
    const ConvParams& c = step.op.conv;
    const ConvWeights& w = program_.weights[static_cast<size_t>(step.weights)];
    const View& iv = step.inputs[0];
    const View& ov = step.output;
    const Shape& is = BufferShape(iv);
    const Shape& os = BufferShape(ov);
    const int in_per_group = iv.channels / c.groups;
    const int out_per_group = ov.channels / c.groups;
    for (int n = 0; n < batch_; ++n) {
      const float* in = At(iv, n);
      float* out = At(ov, n);
      for (int o = 0; o < ov.channels; ++o) {
        const int g = o / out_per_group;
        for (int oy = 0; oy < os.h; ++oy) {
          for (int ox = 0; ox < os.w; ++ox) {
            double sum = w.bias.empty() ? 0.0 : w.bias[static_cast<size_t>(o)];
            for (int i = 0; i < in_per_group; ++i) {
              const int ic = g * in_per_group + i;
              for (int ky = 0; ky < c.kernel.h; ++ky) {
                const int iy = oy * c.stride.h - c.padding.h + ky * c.dilation.h;
                if (iy < 0 || iy >= is.h) continue;
                for (int kx = 0; kx < c.kernel.w; ++kx) {
                  const int ix = ox * c.stride.w - c.padding.w + kx * c.dilation.w;
                  if (ix < 0 || ix >= is.w) continue;
                  const size_t k =
                      ((static_cast<size_t>(o) * in_per_group + i) * c.kernel.h + ky) * c.kernel.w +
                      kx;
                  sum += static_cast<double>(w.kernel[k]) *
                         in[(static_cast<size_t>(ic) * is.h + iy) * is.w + ix];
                }
              }
            }
            out[(static_cast<size_t>(o) * os.h + oy) * os.w + ox] =
                Activate(c.act, static_cast<float>(sum));
          }
        }
      }
    }
  }

  void Pool(const Step& step) {
    const PoolParams& p = step.op.pool;
    const View& iv = step.inputs[0];
    const View& ov = step.output;
    const Shape& is = BufferShape(iv);
    const Shape& os = BufferShape(ov);
    const bool global = p.type == PoolType::kGlobalMax || p.type == PoolType::kGlobalAvg;
    const bool is_max = p.type == PoolType::kMax || p.type == PoolType::kGlobalMax;
    const Window kernel = global ? Window{is.h, is.w} : p.kernel;
    const Window stride = global ? Window{1, 1} : p.stride;
    const Window padding = global ? Window{0, 0} : p.padding;
    // IOS's average pooling counts padding: the divisor is the window size
    // (or, excluding padding, the taps inside the input).
    const double window = static_cast<double>(kernel.h) * kernel.w;
    for (int n = 0; n < batch_; ++n) {
      const float* in = At(iv, n);
      float* out = At(ov, n);
      for (int ch = 0; ch < ov.channels; ++ch) {
        for (int oy = 0; oy < os.h; ++oy) {
          for (int ox = 0; ox < os.w; ++ox) {
            double acc = is_max ? -std::numeric_limits<double>::infinity() : 0.0;
            int inside = 0;
            for (int ky = 0; ky < kernel.h; ++ky) {
              const int iy = oy * stride.h - padding.h + ky;
              if (iy < 0 || iy >= is.h) continue;
              for (int kx = 0; kx < kernel.w; ++kx) {
                const int ix = ox * stride.w - padding.w + kx;
                if (ix < 0 || ix >= is.w) continue;
                const double v = in[(static_cast<size_t>(ch) * is.h + iy) * is.w + ix];
                acc = is_max ? std::max(acc, v) : acc + v;
                ++inside;
              }
            }
            out[(static_cast<size_t>(ch) * os.h + oy) * os.w + ox] =
                static_cast<float>(is_max ? acc : acc / (p.exclude_padding ? inside : window));
          }
        }
      }
    }
  }

  // A kind of common/op_kinds.h: its own reference arithmetic, per sample
  // (a view's sample is contiguous in NCHW).
  void Registered(const Step& step) {
    const View& iv = step.inputs[0];
    const Shape& is = BufferShape(iv);
    const OpKindSpec& spec = SpecOf(step.op.registered.kind);
    KindWeightValues weights;
    if (step.weights >= 0) {
      const ConvWeights& w = program_.weights.at(static_cast<size_t>(step.weights));
      weights = {w.kernel, w.bias};
    }
    for (int n = 0; n < batch_; ++n) {
      spec.reference(step.op.registered, Shape{iv.channels, is.h, is.w}, At(iv, n),
                     At(step.output, n), weights);
    }
  }

  // Activation, eltwise and identity: same-shaped views, value by value.
  //! An eltwise input may be C x 1 x 1: one value per channel, for every
  //! pixel of it.
  void Pointwise(const Step& step) {
    const size_t plane = Plane(step.output);
    const size_t count = plane * static_cast<size_t>(step.output.channels);
    std::vector<size_t> divisor;  // element i of the output reads i / divisor of an input
    for (const View& v : step.inputs) divisor.push_back(Plane(v) == plane ? 1 : plane);
    for (int n = 0; n < batch_; ++n) {
      float* out = At(step.output, n);
      std::vector<const float*> ins;
      for (const View& v : step.inputs) ins.push_back(At(v, n));
      for (size_t i = 0; i < count; ++i) {
        float v = ins[0][i / divisor[0]];
        if (step.op.kind == OpKind::kActivation) {
          v = Activate(step.op.act, v);
        } else {
          const bool mul = step.op.kind == OpKind::kEltwise && step.op.eltwise == EltwiseType::kMul;
          for (size_t k = 1; k < ins.size(); ++k) {
            const float x = ins[k][i / divisor[k]];
            v = mul ? v * x : v + x;
          }
        }
        out[i] = v;
      }
    }
  }

  const Program program_;
  const int batch_;
  std::vector<std::vector<float>> storage_;  // one per slot
};

class ReferenceDevice : public Device {
 public:
  ReferenceDevice() {
    info_.backend = "reference";
    info_.name = "reference";
    info_.fingerprint = "reference:naive-loops-v1";
    info_.simulated = false;
  }

  const DeviceInfo& Info() const override { return info_; }

  std::unique_ptr<PreparedProgram> Prepare(const Program& program, int batch) override {
    Validate(program);
    if (batch < 1) {
      throw ExecError(MeasureError::kUnsupported,
                      "reference device: batch size must be >= 1, got " + std::to_string(batch));
    }
    int64_t bytes = program.ActivationBytes(batch);
    if (__builtin_add_overflow(bytes, WeightBytes(program), &bytes)) {
      bytes = std::numeric_limits<int64_t>::max();
    }
    const int64_t bound = MemoryBound();
    if (bytes > bound) {
      throw ExecError(MeasureError::kOutOfMemory,
                      "reference device: the program needs " + std::to_string(bytes) +
                          " bytes at batch " + std::to_string(batch) + ", more than the " +
                          std::to_string(bound) + " bytes of physical memory");
    }
    try {
      return std::make_unique<ReferenceProgram>(program, batch);
    } catch (const std::bad_alloc&) {
      throw ExecError(MeasureError::kOutOfMemory, "reference device: allocating " +
                                                      std::to_string(bytes) + " bytes at batch " +
                                                      std::to_string(batch) + " failed");
    }
  }

 private:
  DeviceInfo info_;
};

}  // namespace

std::unique_ptr<Device> MakeReferenceDevice() { return std::make_unique<ReferenceDevice>(); }

}  // namespace ios::exec
