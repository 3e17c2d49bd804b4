// A multi-device run played by the devices themselves (run/multi_device_run.h
// drives it): every device's program and the copies between them, enqueued
// from one host thread where the backend can order work across devices on
// its own (CUDA streams and events: devices/cuda/cuda_multi.h). Backends that
// cannot are driven one thread per device with host staging instead.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "exec/program.h"

namespace ios::exec {

//! One copy of a tensor between two devices' programs of one run.
struct ProgramCopy {
  int from = -1, to = -1;  // device indices
  View source;             // the sender's view (a SentTensor's)
  int after_stage = 0;     // the sender's stage that computes it
  int buffer = -1;         // the receiver's buffer (a ReceivedTensor's)
  int before_stage = 0;    // the receiver's first stage that reads it
  //! Names it in errors: "the copy of 'conv2' from device 0 (cuda:0) to
  //! device 1 (cuda:1)".
  std::string label;
};

//! Every device's program of a run prepared, with the copies between them.
//! Not thread-safe: one thread calls it.
class PreparedMultiProgram {
 public:
  virtual ~PreparedMultiProgram() = default;
  //! Fills buffer `buffer` of device `device`'s program (batch x c x h x w
  //! values), when no run is in flight.
  virtual void Write(int device, int buffer, std::span<const float> values) = 0;
  //! Reads a view of device `device`'s program once every run has ended.
  virtual std::vector<float> Read(int device, const View& view) = 0;
  //! Runs every program with its copies `runs` times, back to back, each run
  //! starting once every device has finished the previous one; returns the
  //! elapsed milliseconds from the first device starting to the last
  //! finishing, by the devices' own clock. Throws ExecError naming the call,
  //! the device and (for a copy) the copy's label on a failure.
  virtual double TimedRuns(int runs) = 0;
};

}  // namespace ios::exec
