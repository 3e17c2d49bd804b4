// The devices ios-run can execute on, by command-line name.
#pragma once

#include <memory>
#include <string>

#include "exec/device.h"
#include "worker/backend.h"

namespace ios::run {

//! "cpu[,threads=N]" (oneDNN), "cuda[:GPU][,...]" (cuDNN; docs/gpu.md) or
//! "reference" (the naive device). Throws ios::Error listing the valid
//! names; sim devices model latencies and cannot execute.
std::unique_ptr<exec::Device> OpenDevice(const std::string& name);

//! A backend measuring single stages on the same kind of device, for the
//! DP's prediction.
std::unique_ptr<worker::Backend> OpenMeasuringBackend(const std::string& name);

}  // namespace ios::run
