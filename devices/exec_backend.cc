#include "devices/exec_backend.h"

#include <cstdint>
#include <new>
#include <vector>

#include "exec/program.h"
#include "exec/protocol.h"
#include "exec/weights.h"

namespace ios::devices {
namespace {

MeasureResult Failure(MeasureError kind, std::string message) {
  MeasureResult result;
  result.error = kind;
  result.error_message = std::move(message);
  return result;
}

class ExecBackend : public Backend {
 public:
  explicit ExecBackend(std::unique_ptr<exec::Device> device) : device_(std::move(device)) {}

  const DeviceInfo& Device() const override { return device_->Info(); }
  bool Lost() const override { return lost_; }

  MeasureResult Measure(const StageSpec& stage, int batch_size,
                        const MeasureSettings& settings) override {
    return Guarded(batch_size, settings, [&] {
      const exec::Program program = exec::StageProgram(stage);
      std::unique_ptr<exec::PreparedProgram> prepared = device_->Prepare(program, batch_size);
      for (size_t i = 0; i < program.inputs.size(); ++i) {
        const Shape& shape = program.buffers.at(program.inputs[i]).shape;
        prepared->Write(program.inputs[i],
                        exec::SeededValues(
                            static_cast<size_t>(batch_size) * shape.c * shape.h * shape.w, i + 1));
      }
      MeasureResult result = exec::RunProtocol(settings, [&](int runs) {
        return settings.protocol == StageProtocol::kExecuted
                   ? prepared->TimedRunsAsExecuted(runs, settings.warm_weights)
                   : prepared->TimedColdRuns(runs);
      });
      result.detail = prepared->Detail();
      return result;
    });
  }

  MeasureResult MeasureNetwork(const NetworkSpec& network, int batch_size,
                               const MeasureSettings& settings) override {
    return Guarded(batch_size, settings, [&] {
      const exec::WeightStore weights =
          exec::WeightStore::Random(network.graph, network.weight_seed);
      const exec::NetworkProgram built =
          exec::BuildNetworkProgram(network.graph, network.stages, weights);
      std::unique_ptr<exec::PreparedProgram> prepared = device_->Prepare(built.program, batch_size);
      const Shape& input = network.graph.node(0).output;
      prepared->Write(
          built.program.inputs.at(0),
          exec::SeededValues(static_cast<size_t>(batch_size) * input.c * input.h * input.w,
                             network.weight_seed));
      // As ios-run runs it: a device that can replay the recorded network
      // (a GPU: one CUDA graph) is timed replaying it; warm, as one
      // inference after another finds it.
      const bool replay = prepared->CanReplay();
      MeasureResult result = exec::RunProtocol(settings, [&](int runs) {
        return replay ? prepared->TimedReplays(runs) : prepared->TimedRuns(runs);
      });
      result.detail =
          std::string(replay ? "replayed as one recorded graph" : "run stage by stage") +
          (prepared->Detail().empty() ? "" : "; " + prepared->Detail());
      return result;
    });
  }

 private:
  //! Checks what every measurement needs, runs `measure` and turns what it
  //! throws into a result of the matching kind.
  template <typename Measure>
  MeasureResult Guarded(int batch_size, const MeasureSettings& settings, Measure&& measure) {
    const std::string& backend = device_->Info().backend;
    if (lost_) {
      return Failure(MeasureError::kBackendFailure, backend + ": the device was lost earlier");
    }
    if (batch_size < 1 || settings.number < 1 || settings.repeat < 1) {
      return Failure(MeasureError::kUnsupported,
                     backend + ": batch size, number and repeat must be at least 1");
    }
    if (settings.dtype != "float32") {
      return Failure(MeasureError::kUnsupported,
                     backend + ": measures float32 only, not " + settings.dtype);
    }
    try {
      return measure();
    } catch (const exec::DeviceLostError& e) {
      lost_ = true;
      return Failure(e.kind(), e.what());
    } catch (const exec::ExecError& e) {
      return Failure(e.kind(), e.what());
    } catch (const std::bad_alloc&) {
      return Failure(MeasureError::kOutOfMemory, backend + ": out of memory");
    } catch (const Error& e) {
      // A stage or network the program builder refuses is its own failure.
      return Failure(MeasureError::kUnsupported, e.what());
    } catch (const std::exception& e) {
      return Failure(MeasureError::kBackendFailure, backend + ": " + e.what());
    }
  }

  std::unique_ptr<exec::Device> device_;
  bool lost_ = false;
};

}  // namespace

std::unique_ptr<Backend> MakeExecBackend(std::unique_ptr<exec::Device> device) {
  return std::make_unique<ExecBackend>(std::move(device));
}

}  // namespace ios::devices
