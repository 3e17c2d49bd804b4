// A Backend on any exec::Device: a stage is turned into its exec program,
// prepared once, fed seeded random inputs and timed with the shared protocol,
// each run as the settings' StageProtocol says (kIsolated:
// PreparedProgram::TimedColdRuns; kExecuted: TimedRunsAsExecuted).
#pragma once

#include <memory>

#include "devices/backend.h"
#include "exec/device.h"

namespace ios::devices {

//! Measure never throws for a stage: ExecError comes back with its kind,
//! std::bad_alloc as out of memory, an ios::Error (a stage the program
//! builder refuses) as unsupported, any other exception as a backend
//! failure.
std::unique_ptr<Backend> MakeExecBackend(std::unique_ptr<exec::Device> device);

}  // namespace ios::devices
