// The cpu device: exec programs played on oneDNN (docs/cpu-backend.md).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "exec/device.h"

namespace ios::devices {

struct CpuOptions {
  //! OpenMP threads a stage may use in all, split across its lanes. 0: one
  //! per core this process may run on (sched_getaffinity).
  int threads = 0;
  //! The cores the device runs on, ascending: its lanes are pinned within
  //! them, and HostCpus() names them so that the thread driving it runs
  //! there too (a multi-device run gives each device its own). Each must be
  //! one this process may run on. Empty: every core it may run on, and the
  //! driving thread wherever it is. With threads 0: one thread per core.
  std::vector<int> cpus = {};
  //! Whether a measured stage starts each run with its data flushed from
  //! the caches (cold, the default: as inside a whole network, where the
  //! rest of the network displaces it) or as the previous run left it
  //! (warm). x86-64 only; elsewhere always warm. Whole-network runs
  //! (ios-run) never flush.
  bool cold_stage_runs = true;
};

//! A oneDNN cpu device. Throws ios::Error when `options` are invalid.
std::unique_ptr<exec::Device> MakeCpuDevice(const CpuOptions& options = {});

//! Parses the options of a backend name
//! "cpu[,threads=N][,cpus=LIST][,cache=cold|warm]", LIST as "0-3+8"
//! (the part after "cpu"). Throws ios::Error naming the option and the
//! grammar.
CpuOptions ParseCpuOptions(const std::string& name);

}  // namespace ios::devices
