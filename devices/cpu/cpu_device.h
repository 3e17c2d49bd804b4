// The cpu device: exec programs played on oneDNN (docs/cpu-backend.md).
#pragma once

#include <memory>
#include <string>

#include "exec/device.h"

namespace ios::devices {

struct CpuOptions {
  //! OpenMP threads a stage may use in all, split across its lanes. 0: one
  //! per core this process may run on (sched_getaffinity).
  int threads = 0;
  //! Whether a measured stage starts each run with its data flushed from
  //! the caches (cold, the default: as inside a whole network, where the
  //! rest of the network displaces it) or as the previous run left it
  //! (warm). x86-64 only; elsewhere always warm. Whole-network runs
  //! (ios-run) never flush.
  bool cold_stage_runs = true;
};

//! A oneDNN cpu device. Throws ios::Error when `options` are invalid.
std::unique_ptr<exec::Device> MakeCpuDevice(const CpuOptions& options = {});

//! Parses the options of a backend name "cpu[,threads=N][,cache=cold|warm]"
//! (the part after "cpu"). Throws ios::Error naming the option and the
//! grammar.
CpuOptions ParseCpuOptions(const std::string& name);

}  // namespace ios::devices
