// The cuda device (docs/gpu.md): the GPU it opens, its fingerprint, and the
// programs it prepares (cuda_program.h; their compilation, cuda_compile.cc;
// algorithm choice, cuda_algorithms.cc). Everything is plain C++ on
// cuda::Api, so it is compiled and tested (against a recording fake) on
// machines without CUDA; the library calls are in cuda_api_real.cc.
#include "devices/cuda/cuda_device.h"

#include <spdlog/spdlog.h>

#include <sstream>
#include <utility>

#include "devices/cuda/cuda_program.h"
#include "exec/program.h"

namespace ios::devices {
namespace cuda_detail {

using cuda::Code;
using exec::ExecError;

[[noreturn]] void Fail(const cuda::Status& status, const std::string& where) {
  const std::string text = "cuda: " + where + ": " + status.call + " failed: " + status.message;
  switch (status.code) {
    case Code::kOutOfMemory:
      throw ExecError(MeasureError::kOutOfMemory, text);
    case Code::kUnsupported:
      throw ExecError(MeasureError::kUnsupported, text);
    case Code::kRefused:
      // The library says the same of the same arguments every time: a fact
      // about the stage, kept, where a backend failure would be measured
      // again by every search.
      throw ExecError(MeasureError::kUnsupported,
                      text + " (cuDNN refuses these arguments; not measured again)");
    case Code::kDeviceLost:
      throw exec::DeviceLostError(text + " (the GPU context is lost until the process exits)");
    case Code::kOk:
    case Code::kFailure:
    case Code::kNoDevice:
      break;
  }
  throw ExecError(MeasureError::kBackendFailure, text);
}

std::string MiB(double bytes) {
  std::ostringstream text;
  text.precision(bytes < 10 * 1024 * 1024 ? 2 : 0);
  text << std::fixed << bytes / (1024 * 1024) << " MiB";
  return text.str();
}

std::string Describe(const cuda::TensorLayout& t) {
  return std::to_string(t.n) + "x" + std::to_string(t.c) + "x" + std::to_string(t.h) + "x" +
         std::to_string(t.w) + "/" + std::to_string(t.stride_n) + "," + std::to_string(t.stride_c) +
         "," + std::to_string(t.stride_h) + "," + std::to_string(t.stride_w);
}

namespace {

std::string VersionText(int cuda_version) {
  return std::to_string(cuda_version / 1000) + "." + std::to_string(cuda_version % 1000 / 10);
}

class CudaDevice : public exec::Device {
 public:
  CudaDevice(std::unique_ptr<cuda::Api> api, const CudaOptions& options, OnceLatch& clocks_said)
      : state_(std::make_shared<DeviceState>()) {
    state_->api = std::move(api);
    state_->options = options;
    state_->pool = std::make_unique<cuda_detail::DevicePool>(*state_->api);
    cuda::Api& a = *state_->api;
    int count = 0;
    const cuda::Status counted = a.DeviceCount(count);
    if (!counted.ok()) {
      throw ExecError(MeasureError::kBackendFailure,
                      "cuda: no usable GPU: " + counted.call + " failed: " + counted.message +
                          (counted.code == Code::kNoDevice
                               ? " (is the NVIDIA driver installed? nvidia-smi must list the GPU)"
                               : ""));
    }
    if (options.gpu < 0 || options.gpu >= count) {
      throw ExecError(MeasureError::kBackendFailure,
                      "cuda: GPU " + std::to_string(options.gpu) + " asked for; this machine has " +
                          std::to_string(count) + (count == 1 ? " GPU (0)" : " GPUs") +
                          (count > 1 ? " (0.." + std::to_string(count - 1) + ")" : ""));
    }
    Check(a.SetDevice(options.gpu), "selecting GPU " + std::to_string(options.gpu));
    cuda::DeviceProperties p;
    Check(a.Properties(options.gpu, p), "reading the GPU's properties");
    cuda::Versions v;
    Check(a.GetVersions(v), "reading the driver, runtime and cuDNN versions");
    const bool tf32 = options.math == CudaOptions::Math::kTf32;
    info_.backend = "cuda";
    info_.name = p.name;
    info_.simulated = false;
    std::ostringstream fp;
    fp << "cuda-v1|gpu=" << p.name << "|cc=" << p.major << "." << p.minor << "|sms=" << p.sm_count
       << "|memory_mib=" << p.memory_bytes / (1024 * 1024) << "|clock_khz=" << p.clock_khz
       << "|memory_clock_khz=" << p.memory_clock_khz << "|driver=" << VersionText(v.driver)
       << "|runtime=" << VersionText(v.runtime) << "|cudnn=" << v.cudnn
       << "|math=" << (tf32 ? "tf32" : "fp32")
       << "|algo=" << (options.algo == CudaOptions::Algo::kExhaustive ? "exhaustive" : "heuristic")
       << "|workspace_mb=" << options.workspace_mb << "|fp32";
    info_.fingerprint = fp.str();
    // Said once per process: ios-run and the tests open several devices,
    // and the advice does not change between them.
    if (!clocks_said.Done() && !a.ClocksLocked(options.gpu) && clocks_said.Set()) {
      spdlog::warn(
          "cuda: GPU {} ({}): application clocks are not locked; timings drift with boost "
          "clocks and temperature (docs/gpu.md: nvidia-smi --lock-gpu-clocks)",
          options.gpu, p.name);
    }
  }

  const DeviceInfo& Info() const override { return info_; }
  const std::shared_ptr<DeviceState>& state() const { return state_; }

  std::unique_ptr<exec::PreparedProgram> Prepare(const exec::Program& program, int batch) override {
    if (state_->lost) {
      throw exec::DeviceLostError("cuda: the GPU context was lost by an earlier error");
    }
    if (batch < 1) throw ExecError(MeasureError::kUnsupported, "cuda: batch size must be >= 1");
    try {
      exec::Validate(program);
    } catch (const Error& e) {
      throw ExecError(MeasureError::kBackendFailure,
                      std::string("cuda: the program is not well formed: ") + e.what());
    }
    try {
      Check(state_->api->SetDevice(state_->options.gpu), "selecting the GPU");
      return std::make_unique<CudaPreparedProgram>(state_, program, batch);
    } catch (const exec::DeviceLostError&) {
      state_->lost = true;
      throw;
    }
  }

 private:
  std::shared_ptr<DeviceState> state_;
  DeviceInfo info_;
};

}  // namespace

std::shared_ptr<DeviceState> StateOf(exec::Device& device) {
  auto* cuda = dynamic_cast<CudaDevice*>(&device);
  return cuda == nullptr ? nullptr : cuda->state();
}

}  // namespace cuda_detail

std::unique_ptr<exec::Device> MakeCudaDevice(std::unique_ptr<cuda::Api> api,
                                             const CudaOptions& options) {
  // The process's own latch: a one-way flag about what this process has
  // written to its log, on which no result depends (so not the global
  // mutable state the style guide means). Tests pass latches of their own.
  static OnceLatch clocks_said;
  return MakeCudaDevice(std::move(api), options, clocks_said);
}

std::unique_ptr<exec::Device> MakeCudaDevice(std::unique_ptr<cuda::Api> api,
                                             const CudaOptions& options, OnceLatch& said) {
  if (!api) throw Error("cuda: no CUDA API given");
  return std::make_unique<cuda_detail::CudaDevice>(std::move(api), options, said);
}

}  // namespace ios::devices
