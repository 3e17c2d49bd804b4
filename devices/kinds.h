// The backend kinds this library holds, one function each, defined in the
// kind's own folder (internal to devices/: tools use devices/registry.h).
#pragma once

#include <string>
#include <string_view>

#include "devices/registry.h"

namespace ios::devices {

//! "cpu[,threads=N][,cpus=LIST][,cache=cold|warm]": oneDNN (devices/cpu). Where this
//! build has no oneDNN, a kind that says so when opened.
BackendKind CpuKind();
//! "cuda[:GPU][,...]" by name (devices/cuda/cuda_kind.cc): it opens only in
//! tools that link CUDA (LinkedRegistry); elsewhere it says where it runs.
BackendKind CudaKind();
//! "sim:MODEL": the analytical GPU model (devices/sim); cannot execute.
BackendKind SimKind();
//! "reference": the naive device (exec/): checks, not speed.
BackendKind ReferenceKind();

//! Makes `kind` refuse to open anything: both openers call `refuse`, which
//! throws saying why (a name known here whose library is not).
using Refusal = void (*)(const std::string& name, const BackendOptions& options);
void RefuseToOpen(BackendKind& kind, Refusal refuse);

//! The positive number after `field` (e.g. "|threads=") in a fingerprint,
//! or 0 when absent or absurd: cost facts read their device's figures so.
double FingerprintNumber(const std::string& fingerprint, std::string_view field);

}  // namespace ios::devices
