// Internal to the farm (coordinator/farm.cc): the thread that owns the
// ROUTER socket — worker table, query queue, dispatch, heartbeats, deadlines
// — and the little it shares with the caller's thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <map>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <vector>

#include "coordinator/farm.h"

namespace zmq {
class socket_t;
}

namespace ios::net {
class HandshakeMonitor;
}

namespace ios::coordinator::detail {

//! One query of a batch, encoded (and checked) on the caller's thread. The
//! router owns these bytes: it never reads the caller's specs, so MeasureAll
//! may return, and its caller free them, whatever the router is doing.
struct PostedQuery {
  uint32_t offset = 0;   // into the batch's specs
  std::string bytes;     // the encoded StageQuery, id first_query_id + offset
  bool network = false;  // it times a whole network (reported apart from stages)
};

//! The batch a MeasureStream call is measuring (it may grow).
struct FarmBatch {
  uint64_t generation = 0;      // one per MeasureStream call; 0: none yet
  bool open = false;            // false once the caller has closed it
  uint64_t first_query_id = 0;  // the query of `offset` has id first_query_id + offset
  size_t size = 0;              // specs in the batch (some answered by the caller)
  //! Devices a worker must own to take the batch's queries (a link: 2).
  uint32_t min_devices = 1;
};

//! What the caller's thread and the router thread share; every field but
//! `matching` under `mutex`, changes announced on `changed`. The caller
//! changes `batch` and `posted` and then sends "u" on the control socket.
struct FarmShared {
  mutable std::mutex mutex;
  mutable std::condition_variable changed;
  std::optional<DeviceInfo> device;             // fixed by the first serving worker
  std::map<std::string, WorkerReport> reports;  // one per worker session, ever
  int joined = 0;
  std::atomic<int> matching{0};        // serving workers connected now
  std::atomic<int> credit{0};          // their capacities, summed
  std::atomic<int> multi_device{0};    // serving workers owning two or more devices
  FarmBatch batch;                     // set by the caller
  std::vector<PostedQuery> posted;     // of `batch`, not yet taken by the router
  std::vector<IndexedResult> arrived;  // of `batch`, not yet handed to the caller
  std::string fatal;                   // the router thread failed; non-empty ends waits
};

//! Whether a worker of `device` serves the farm's --device `selector`: its
//! name, its backend (options after ',' and a cuda ordinal aside) or its
//! fingerprint (defined in farm.cc).
bool Serves(const std::string& selector, const DeviceInfo& device);

//! Runs the router thread until `stop` is requested or "s" arrives on
//! `control` (a pair socket); "u" says `shared.batch` or `shared.posted`
//! changed. Polls `monitor` (may be null) for failed handshakes. Closes
//! `router` and `control` before returning; never throws: a failure is
//! reported through `shared.fatal`.
void RunFarmRouter(const FarmOptions& options, FarmShared& shared, zmq::socket_t& router,
                   zmq::socket_t& control, net::HandshakeMonitor* monitor,
                   std::stop_token stop) noexcept;

}  // namespace ios::coordinator::detail
