// The measurement farm: a ZeroMQ ROUTER that hands stage queries to
// ios-worker processes (or to embedded worker threads over inproc://, with
// the same protocol), with credit-based flow control, heartbeats, re-queueing
// of a lost worker's queries, per-query deadlines and bounded retries.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "coordinator/measurer.h"
#include "devices/registry.h"

namespace ios::coordinator {

struct FarmOptions {
  //! ZeroMQ endpoint to bind for remote workers (e.g. "tcp://*:5555");
  //! empty: embedded only.
  std::string bind;
  //! Worker threads started in-process over inproc:// (same protocol).
  int local_workers = 1;
  //! Backend of the embedded workers (also how the search device is named).
  std::string local_backend = "sim:v100";
  devices::BackendOptions local_backend_options;
  //! Where backend names are looked up (embedded workers, a sim --device);
  //! borrowed, must outlive the farm. Null: devices::BuiltinRegistry().
  const devices::Registry* registry = nullptr;

  //! Which workers may serve the search: a worker matches when this equals
  //! its device name, backend or fingerprint. The first matching worker
  //! fixes the search's fingerprint; later ones must have the same.
  std::string device = "sim:v100";
  //! Wait until this many matching workers are connected before measuring.
  int min_workers = 1;
  std::chrono::milliseconds wait_for_workers{std::chrono::seconds(60)};

  std::chrono::milliseconds heartbeat{1000};
  //! A worker silent for `liveness` of its heartbeat periods is lost.
  int liveness = 3;
  //! A query unanswered this long is sent elsewhere...
  std::chrono::milliseconds query_timeout{std::chrono::seconds(120)};
  //! ...at most this many times in all; then its result is a timeout error.
  int max_attempts = 3;

  //! CURVE: the coordinator's key pair file and a directory of allowed
  //! worker public keys (*.pub). Both empty: no authentication.
  std::string curve_secret_key_file;
  std::string curve_allow_dir;
};

//! What one worker did during this coordinator's life.
struct WorkerReport {
  std::string worker_id, device_name, address;
  bool matches = false;    // served the search's device
  bool connected = false;  // still connected at the time of the report
  //! Stage queries answered; `networks`: whole networks timed end to end
  //! (the search's verification). `failed` counts both kinds.
  int64_t answered = 0, networks = 0, failed = 0, requeued = 0, late = 0;
};

//! A Measurer backed by workers. Thread-compatible: one thread calls the
//! Measurer methods; the socket lives on an internal thread. MeasureStream
//! encodes every query on the calling thread and hands the bytes over, so
//! its specs are not read once it returns; a stage beyond the wire
//! protocol's budgets (which every worker would refuse) is answered at once
//! with an `unsupported` result instead of being sent.
class Farm : public Measurer {
 public:
  //! Binds, starts the embedded workers and the CURVE handler. Throws
  //! ios::Error on a bad endpoint (net/endpoint.h), an address in use, bad
  //! key files, or a local backend that cannot be made; nothing is left
  //! running then.
  static std::unique_ptr<Farm> Start(const FarmOptions& options);
  ~Farm() override = default;

  //! Blocks until `min_workers` matching workers are connected (after a first
  //! success, until at least one is: the workers lost since do not hold a
  //! later batch back). Throws
  //! ios::Error saying who did connect when the wait times out.
  virtual void WaitForWorkers() = 0;
  //! MeasureLink goes to a worker that announced two or more devices
  //! (Hello::devices) and serves the search's device; with none connected
  //! once WaitForWorkers returns (or when the last leaves before it
  //! answers) the answer is an error saying so, at once. Throws ios::Error
  //! as MeasureStream does when no worker at all comes.
  //! The endpoint actually bound (a "*:0" port resolved); empty if none.
  virtual std::string BoundEndpoint() const = 0;
  virtual std::vector<WorkerReport> Workers() const = 0;
};

}  // namespace ios::coordinator
