// Internal to the farm (coordinator/farm.cc): the thread that owns the
// ROUTER socket — worker table, query queue, dispatch, heartbeats, deadlines
// — and the little it shares with the caller's thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "coordinator/farm.h"

namespace zmq {
class socket_t;
}

namespace ios::coordinator::detail {

//! A MeasureAll call's queries; `specs` belongs to the caller.
struct FarmBatch {
  const std::vector<const StageSpec*>* specs = nullptr;
  int batch_size = 1;
  MeasureSettings settings;
};

//! What the caller's thread and the router thread share; every field but
//! `matching` under `mutex`, changes announced on `changed`.
struct FarmShared {
  mutable std::mutex mutex;
  mutable std::condition_variable changed;
  std::optional<DeviceInfo> device;             // fixed by the first serving worker
  std::map<std::string, WorkerReport> reports;  // one per connection, ever
  int joined = 0;
  std::atomic<int> matching{0};        // serving workers connected now
  FarmBatch batch;                     // posted by the caller, then "b" on control
  std::vector<IndexedResult> arrived;  // results not yet handed to the caller
  bool batch_closed = false;           // the router has let go of batch.specs
  std::string fatal;                   // the router thread failed; non-empty ends waits
};

//! Runs the router thread until "s" arrives on `control` (a pair socket):
//! "b" starts the posted batch, "c" closes it. Closes both sockets before
//! returning; a failure is reported through `shared.fatal`, never thrown.
void RunFarmRouter(const FarmOptions& options, FarmShared& shared, zmq::socket_t& router,
                   zmq::socket_t& control);

}  // namespace ios::coordinator::detail
