// Internal to ios-coordinator: the farm a command measures through.
#pragma once

#include <memory>

#include "coordinator/cli.h"
#include "coordinator/farm.h"
#include "coordinator/worker_process.h"

namespace ios::coordinator::cli {

// The farm of a search, and the ios-worker child it measures through, if
// any (stopped after the farm has said goodbye).
class RunningFarm {
 public:
  RunningFarm(std::unique_ptr<SupervisedWorker> process, std::unique_ptr<Farm> farm)
      : process_(std::move(process)), farm_(std::move(farm)) {}
  Farm& operator*() const { return *farm_; }
  Farm* operator->() const { return farm_.get(); }

 private:
  std::unique_ptr<SupervisedWorker> process_;
  std::unique_ptr<Farm> farm_;  // after process_: goes first
};

//! Starts the farm --device, --bind and the farm options ask for (and the
//! child ios-worker, when the device needs its own process).
RunningFarm StartFarm(const CliOptions& cli);

}  // namespace ios::coordinator::cli
