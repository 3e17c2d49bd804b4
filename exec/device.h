// The narrow interface every real backend implements (cpu on oneDNN, cuda on
// cuDNN) and the naive reference device: prepare a program once, run it
// many times.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/measurement.h"
#include "exec/program.h"

namespace ios::exec {

//! A failure with a kind the farm understands (out of memory, unsupported,
//! backend failure). Backends throw it from Prepare and from runs; the
//! worker turns it into a MeasureResult.
class ExecError : public Error {
 public:
  ExecError(MeasureError kind, const std::string& message) : Error(message), kind_(kind) {}
  MeasureError kind() const { return kind_; }

 private:
  MeasureError kind_;
};

//! The device can run nothing more in this process: a sticky CUDA error
//! (illegal address, launch failure) poisons the context until exit. The
//! worker answers the query that met it as a backend failure and exits
//! non-zero, so that whatever supervises it starts a fresh process.
class DeviceLostError : public ExecError {
 public:
  explicit DeviceLostError(const std::string& message)
      : ExecError(MeasureError::kBackendFailure, message) {}
};

//! A program prepared on a device: storage allocated, primitives created,
//! algorithms chosen, weights uploaded. Runs reuse all of it. Not
//! thread-safe: one thread calls it.
class PreparedProgram {
 public:
  virtual ~PreparedProgram() = default;
  //! Fills an input buffer with batch x c x h x w values (NCHW).
  virtual void Write(int buffer, std::span<const float> values) = 0;
  //! Reads a view as batch x channels x h x w values (NCHW).
  virtual std::vector<float> Read(const View& view) = 0;
  //! Runs every stage in order, `runs` times, and returns the elapsed
  //! milliseconds by the device's own clock; whatever a run pays (layout
  //! reorders, thread fork and join) is inside it.
  virtual double TimedRuns(int runs) = 0;
  //! Runs stages [begin, end) once, in order, untimed: a multi-device run
  //! (run/multi_device_run.h) plays a program in pieces, copying tensors
  //! between devices between them. Requires 0 <= begin <= end <= the
  //! program's stage count. Throws ExecError kUnsupported where the device
  //! cannot (the default).
  virtual void RunStages(int begin, int end) {
    (void)begin;
    (void)end;
    throw ExecError(MeasureError::kUnsupported, "this device cannot run a program in pieces");
  }
  //! Like TimedRuns, but each run starts with the run's own data (weights,
  //! activations, scratch) flushed from the caches, as a stage inside a
  //! whole network finds it: the rest of the network has displaced it. The
  //! flush is not timed. Stage measurement uses this; a device without the
  //! notion (or told to measure warm) runs TimedRuns.
  virtual double TimedColdRuns(int runs) { return TimedRuns(runs); }
  //! Times `runs` runs of a measured stage the way a schedule executes it
  //! (StageProtocol::kExecuted, docs/execution.md): on the cpu its inputs
  //! just written by their producers and its weights as warm as a whole
  //! run leaves them (`warm_weights`); on a GPU inside a recorded graph,
  //! copies back to back, paying no launch or synchronisation of its own.
  //! Only the stage's runs are timed. A device with nothing to add runs
  //! TimedRuns.
  virtual double TimedRunsAsExecuted(int runs, bool warm_weights) {
    (void)warm_weights;
    return TimedRuns(runs);
  }
  //! What the device chose to run the program, for the record with its
  //! measurements (cuda: each convolution's algorithm and math); empty when
  //! there is nothing to say.
  virtual std::string Detail() const { return {}; }
  //! Whether the device can record the whole program once and replay it
  //! (CUDA graphs); see TimedReplays.
  virtual bool CanReplay() const { return false; }
  //! Records every stage once, as TimedRuns enqueues it, into one replayable
  //! unit (the first call; later calls reuse it), replays it `runs` times
  //! and returns the elapsed milliseconds. Throws ExecError kUnsupported
  //! where CanReplay() is false.
  virtual double TimedReplays(int runs) {
    (void)runs;
    throw ExecError(MeasureError::kUnsupported, "this device cannot replay a recorded program");
  }
};

//! One device. Not thread-safe: one thread owns it.
class Device {
 public:
  virtual ~Device() = default;
  //! Stable for the device's lifetime and across instances on one machine.
  virtual const DeviceInfo& Info() const = 0;
  //! The host cores the thread driving this device should run on (a cpu
  //! device opened on a share of the cores); empty: anywhere.
  virtual std::vector<int> HostCpus() const { return {}; }
  //! Prepares `program` (Validate must pass) at `batch`. Throws ExecError:
  //! kOutOfMemory when the storage does not fit (checked before allocating),
  //! kUnsupported for an op the device cannot run, kBackendFailure otherwise.
  virtual std::unique_ptr<PreparedProgram> Prepare(const Program& program, int batch) = 0;
};

//! Plain loops, one thread, no library: the oracle the backends are tested
//! against and what ios-run --check compares with on small graphs.
std::unique_ptr<Device> MakeReferenceDevice();

}  // namespace ios::exec
