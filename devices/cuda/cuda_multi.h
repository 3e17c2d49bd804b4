// One inference over several GPUs, played from one host thread (docs/gpu.md,
// "Multi-GPU runs"): each device's program prepared on its own GPU with its
// own stream set, a received tensor in a buffer of the receiver, and the
// copies enqueued between the stages with events across devices, so nothing
// waits on the host until the run has ended. Plain C++ on cuda::Api, like
// the rest of the device: tested on the recording fake.
#pragma once

#include <memory>
#include <vector>

#include "exec/device.h"
#include "exec/multi_program.h"
#include "exec/program.h"

namespace ios::devices {

//! Whether every one of `devices` is a cuda device (MakeCudaDevice's), so
//! that PrepareCudaMultiProgram can play them together. False for none.
bool AreCudaDevices(const std::vector<exec::Device*>& devices);

//! Prepares `programs[d]` on `devices[d]` (borrowed; AreCudaDevices; the
//! same GPU may appear several times) at `batch`, with `copies` between
//! them (each a sender's view after its stage into a receiver's buffer
//! before its stage). Enables peer access once per ordered pair of distinct
//! GPUs that copy, where the GPUs can. Throws exec::ExecError naming the
//! device and the call that failed, ios::Error for copies that do not fit
//! the programs.
std::unique_ptr<exec::PreparedMultiProgram> PrepareCudaMultiProgram(
    const std::vector<exec::Device*>& devices, const std::vector<const exec::Program*>& programs,
    const std::vector<exec::ProgramCopy>& copies, int batch);

}  // namespace ios::devices
