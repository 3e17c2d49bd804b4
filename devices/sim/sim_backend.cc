// The simulated GPU as a Backend: the measurement protocol (optionally with
// seeded noise) around the performance model of sim_model.cc, the built-in
// GPU models, the work facts the search's bounds use, and the factory.
#include "devices/sim/sim_backend.h"

#include <chrono>
#include <cmath>
#include <cstdint>
#include <numbers>
#include <random>
#include <sstream>
#include <thread>
#include <utility>

#include "common/error.h"
#include "devices/sim/sim_internal.h"
#include "exec/protocol.h"
#include "hios/link.h"

namespace ios::devices {
namespace {

using sim_detail::BlockCapacity;
using sim_detail::FullGpuMicroseconds;
using sim_detail::kGiB;
using sim_detail::kStageSyncUs;
using sim_detail::ModelFingerprint;
using sim_detail::PlanStage;
using sim_detail::StageMicroseconds;
using sim_detail::StagePlan;
using sim_detail::WorkContext;

// ---- Measurement protocol -----------------------------------------------------

uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

//! FNV-1a: stable across compilers and runs, unlike std::hash.
uint64_t StableHash(const std::string& text) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (char c : text) h = (h ^ static_cast<unsigned char>(c)) * 0x100000001b3ULL;
  return h;
}

//! A standard normal from a generator whose output the standard fixes
//! (std::normal_distribution differs between standard libraries).
double StandardNormal(std::mt19937_64& rng) {
  const double u1 = (static_cast<double>(rng() >> 11) + 1) * 0x1p-53;  // (0, 1]
  const double u2 = static_cast<double>(rng() >> 11) * 0x1p-53;        // [0, 1)
  return std::sqrt(-2 * std::log(u1)) * std::cos(2 * std::numbers::pi * u2);
}

MeasureResult Failure(MeasureError error, std::string message) {
  MeasureResult result;
  result.error = error;
  result.error_message = std::move(message);
  return result;
}

std::string FormatGiB(double bytes) {
  std::ostringstream out;
  out.precision(3);
  out << bytes / kGiB << " GiB";
  return out.str();
}

class SimBackend final : public Backend {
 public:
  SimBackend(SimGpuSpec gpu, SimOptions options)
      : gpu_(std::move(gpu)), options_(options), device_(MakeDevice(gpu_, options_)) {}

  const DeviceInfo& Device() const override { return device_; }

  MeasureResult Measure(const StageSpec& stage, int batch_size,
                        const MeasureSettings& settings) override {
    Delay();
    return Model(stage, batch_size, settings);
  }

  //! The model's network is its stages one after another: the sum of their
  //! modelled latencies (what the DP adds up), so on the simulator a
  //! verified schedule always measures what it was predicted to.
  MeasureResult MeasureNetwork(const NetworkSpec& network, int batch_size,
                               const MeasureSettings& settings) override {
    Delay();
    MeasureResult total;
    for (const Stage& stage : network.stages) {
      StageSpec spec;
      try {
        spec = MakeStageSpec(network.graph, stage);
      } catch (const Error& e) {
        return Failure(MeasureError::kUnsupported, e.what());
      }
      const MeasureResult one = Model(spec, batch_size, settings);
      if (!one.ok()) return one;
      total.median_ms += one.median_ms;
      total.spread_ms += one.spread_ms;
      total.samples = one.samples;
    }
    total.detail = "simulated: the sum of the modelled stages";
    return total;
  }

  int Devices() const override { return options_.devices; }

  std::vector<LinkFigures> Links() const override {
    if (options_.devices < 2) return {};
    const hios::Link link = hios::PresetLink(hios::LinkKind::kNvlink);
    return {{hios::ToString(link.kind), link.gb_per_s, link.latency_us, /*measured=*/false}};
  }

  //! The preset NVLink's own line, exactly, labelled simulated: the model
  //! has no copies to time.
  LinkMeasurement MeasureLink(const LinkQuery& query) override {
    if (options_.devices < 2) {
      return LinkMeasurement::Unsupported(device_.name +
                                          ": one simulated GPU has no link; open it with "
                                          "two or more devices (ios-worker --devices 2)");
    }
    const hios::Link link = hios::PresetLink(hios::LinkKind::kNvlink);
    LinkMeasurement out;
    out.kind = hios::ToString(link.kind);
    out.simulated = true;
    out.latency_us = link.latency_us;
    out.gb_per_s = link.gb_per_s;
    for (const int64_t bytes : query.bytes) out.samples.push_back({bytes, link.Ms(bytes), 0});
    return out;
  }

 private:
  void Delay() const {
    if (options_.delay_ms > 0) {
      std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(options_.delay_ms));
    }
  }

  MeasureResult Model(const StageSpec& stage, int batch_size,
                      const MeasureSettings& settings) const {
    if (batch_size < 1 || settings.number < 1 || settings.repeat < 1) {
      return Failure(MeasureError::kUnsupported,
                     "sim: batch size, number and repeat must be at least 1");
    }
    if (settings.dtype != "float32") {
      return Failure(MeasureError::kUnsupported, "sim: models float32 only, not " + settings.dtype);
    }
    try {
      const WorkContext ctx{.batch = static_cast<double>(batch_size),
                            .capacity = BlockCapacity(gpu_)};
      const StagePlan plan = PlanStage(stage, ctx);
      if (plan.memory_bytes > gpu_.memory_gib * kGiB) {
        return Failure(MeasureError::kOutOfMemory,
                       "sim: the stage needs " + FormatGiB(plan.memory_bytes) + ", " +
                           device_.name + " has " + FormatGiB(gpu_.memory_gib * kGiB));
      }
      return Protocol(StageMicroseconds(plan, gpu_) / 1000, stage, batch_size, settings);
    } catch (const Error& e) {
      // A spec the model cannot run is this stage's failure, not the worker's.
      return Failure(MeasureError::kUnsupported, e.what());
    }
  }

  static DeviceInfo MakeDevice(const SimGpuSpec& gpu, const SimOptions& options) {
    std::string fingerprint = ModelFingerprint(gpu);
    // Noisy figures are not comparable with exact ones (delay_ms changes
    // nothing measured, so it is not part of the fingerprint).
    if (options.noise > 0) {
      std::ostringstream noise;
      noise.precision(12);
      noise << "|noise=" << options.noise << "|noise_seed=" << options.noise_seed;
      fingerprint += noise.str();
    }
    return DeviceInfo{
        .backend = "sim", .name = "sim:" + gpu.name, .fingerprint = fingerprint, .simulated = true};
  }

  //! The shared protocol (exec/protocol.h) with the model as the timer.
  //! With noise every run is scaled by exp(noise * z), z drawn from a
  //! generator seeded by (seed, stage, batch) so a rerun reproduces the
  //! same figures.
  MeasureResult Protocol(double model_ms, const StageSpec& stage, int batch_size,
                         const MeasureSettings& settings) const {
    if (options_.noise <= 0) {
      return exec::RunProtocol(settings, [model_ms](int runs) { return model_ms * runs; });
    }
    const uint64_t stage_seed = SplitMix64(options_.noise_seed) ^ StableHash(stage.Key());
    std::mt19937_64 rng(SplitMix64(SplitMix64(stage_seed) ^ static_cast<uint64_t>(batch_size)));
    return exec::RunProtocol(settings, [&](int runs) {
      double sum = 0;
      for (int n = 0; n < runs; ++n)
        sum += model_ms * std::exp(options_.noise * StandardNormal(rng));
      return sum;
    });
  }

  const SimGpuSpec gpu_;
  const SimOptions options_;
  const DeviceInfo device_;
};

}  // namespace

const std::vector<SimGpuSpec>& SimGpuSpecs() {
  // Vendor spec-sheet figures (FP32 without tensor cores); launch overheads
  // are typical measured cudaLaunchKernel-to-start latencies, older parts
  // slower. Sources are listed in docs/simulator.md.
  // clang-format off
  static const std::vector<SimGpuSpec> kSpecs = {
      // name     SMs  FP32 TFLOP/s  DRAM GB/s  launch us  GiB
      {"v100",    80,  15.7,         900,       5,         16},  // Tesla V100 SXM2 16 GB
      {"k80",     13,  4.37,         240,       8,         12},  // one GK210 of a K80 board
      {"2080ti",  68,  13.45,        616,       4,         11},  // GeForce RTX 2080 Ti
      {"a100",    108, 19.5,         1555,      4,         40},  // A100 SXM4 40 GB
      {"h100",    132, 67.0,         3350,      3,         80},  // H100 SXM5 80 GB
  };
  // clang-format on
  return kSpecs;
}

void AddSimWorkFacts(const DeviceInfo& device, StageCostFacts& facts) {
  if (device.backend != "sim") return;
  for (const SimGpuSpec& gpu : SimGpuSpecs()) {
    const std::string model = ModelFingerprint(gpu);
    // This build's model of this GPU, exact or with noise (the bounds allow
    // for noise through --bound-margin, as for every device).
    if (device.fingerprint != model && device.fingerprint.rfind(model + "|noise=", 0) != 0) {
      continue;
    }
    facts.stage_fixed_ms = (gpu.launch_us + kStageSyncUs) / 1000;
    facts.operator_work_ms = [gpu](const StageSpec& op, int batch_size) {
      if (op.OperatorCount() != 1) throw Error("sim: operator work is asked of one operator");
      const WorkContext ctx{.batch = static_cast<double>(batch_size),
                            .capacity = BlockCapacity(gpu)};
      return FullGpuMicroseconds(PlanStage(op, ctx), gpu) / 1000;
    };
    return;
  }
}

std::unique_ptr<Backend> CreateSimBackend(const std::string& model, const SimOptions& options) {
  for (const SimGpuSpec& gpu : SimGpuSpecs()) {
    if (gpu.name == model) return std::make_unique<SimBackend>(gpu, options);
  }
  std::string known;
  for (const SimGpuSpec& gpu : SimGpuSpecs()) known += (known.empty() ? "" : ", ") + gpu.name;
  throw Error("unknown simulated GPU '" + model + "'; known models: " + known);
}

}  // namespace ios::devices
