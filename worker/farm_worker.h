// The ios-worker loop: connects to a coordinator (DEALER), announces its
// device, measures the stage queries it is sent on its backend and answers
// each one. Long-lived: it survives coordinator restarts by reconnecting
// with back-off, following the zguide "Paranoid Pirate" conventions. A
// measurement that outlives its bound is given up (see Worker::Run).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>

#include "common/error.h"
#include "devices/backend.h"
#include "net/context.h"
#include "net/curve.h"

namespace ios::worker {

struct WorkerOptions {
  std::string endpoint;   // e.g. "tcp://host:5555" or "inproc://..."
  std::string worker_id;  // for logs; empty: host:pid
  //! Queries accepted in flight: one measuring, the rest queued so the
  //! device never idles while the next query travels. Timings stay serial.
  int capacity = 2;
  std::chrono::milliseconds heartbeat{1000};
  //! The coordinator is presumed gone after this many silent heartbeats.
  int liveness = 3;
  std::chrono::milliseconds reconnect_min{250}, reconnect_max{8000};
  //! Log start, connection and reconnection at info (false: at debug, for
  //! workers embedded in the coordinator, whose log they would clutter).
  bool announce = true;
  //! CURVE: this worker's key pair and the coordinator's public key.
  std::optional<net::CurveKeyPair> curve_keys;
  std::string curve_server_key;
  //! When positive, no measurement may run longer than this, whatever its
  //! query's timeout allows (MeasurementBound).
  std::chrono::milliseconds max_measurement{0};
};

//! What a query from a coordinator that says no timeout (one older than
//! StageQuery::timeout_ms) is taken to allow: ios-coordinator's default.
inline constexpr std::chrono::milliseconds kDefaultQueryTimeout{120000};

//! The least MeasurementBound a query's timeout can give (a worker's own
//! cap may be lower).
inline constexpr std::chrono::milliseconds kMinMeasurementBound{60000};

//! How long one measurement may run before the worker takes it as hung: the
//! query's timeout (kDefaultQueryTimeout when 0) less a quarter of it, at
//! most 10 s, so that the worker's answer arrives before the coordinator's
//! own deadline, and at least kMinMeasurementBound; at most `cap` when
//! positive; at least 1 ms. Counted from
//! the start of the measurement, not the query's arrival: waiting in the
//! queue behind a long measurement is no sign of a hang.
std::chrono::milliseconds MeasurementBound(uint32_t query_timeout_ms,
                                           std::chrono::milliseconds cap);

//! Thrown by Worker::Run when this worker can measure nothing more in this
//! process. Its caller decides what follows: ios-worker's main exits
//! non-zero so that a supervisor starts a fresh process.
class WorkerLost : public Error {
 public:
  enum class Cause {
    kDeviceLost,       // the backend reported its device lost (Backend::Lost)
    kMeasurementHung,  // a measurement outlived its bound; its thread is abandoned
  };
  WorkerLost(Cause cause, const std::string& message) : Error(message), cause_(cause) {}
  Cause cause() const { return cause_; }

 private:
  Cause cause_;
};

//! ios-worker's exit status after WorkerLost(kMeasurementHung): chosen by its
//! main, named here so that a supervisor (SupervisedWorker) can say why.
inline constexpr int kExitMeasurementHung = 3;

struct WorkerCounters {
  int64_t measured = 0, failed = 0, connects = 0, dropped = 0;
};

class Worker {
 public:
  //! Borrows `context`, which must outlive the worker. Throws ios::Error on
  //! an invalid endpoint, capacity or heartbeat. Every connection the worker
  //! makes carries one routing id, fixed for the worker's life, so the
  //! coordinator takes what it sends after a reconnection as its own.
  Worker(net::Context& context, std::unique_ptr<devices::Backend> backend, WorkerOptions options);
  ~Worker();
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  //! Serves coordinators until `stop` is requested (checked at least every
  //! 100 ms). Measures on a second thread so heartbeats flow during long
  //! timings. A coordinator of another protocol version is logged and
  //! retried at the longest back-off. Queued queries survive a lost
  //! connection (they are dropped only when the coordinator says it is
  //! shutting down). A query that names its id but fails the protocol's
  //! checks is answered with an error. Call once. Throws ios::Error if ZeroMQ
  //! refuses the endpoint. Throws WorkerLost(kDeviceLost) after answering
  //! the query that met it when the backend reports its device lost.
  //!
  //! A measurement that runs past its MeasurementBound (checked at least
  //! every 100 ms, also while stopping) is answered with a `timeout` error,
  //! queued queries are left to the coordinator's deadlines, and Run throws
  //! WorkerLost(kMeasurementHung). The measuring thread cannot be joined
  //! then: it is detached, keeping the backend alive (it never touches this
  //! Worker, its sockets or `context` again), so the Worker and the context
  //! can still be destroyed. A backend that never returns holds its thread
  //! and device until the process ends: the caller should end the process
  //! soon (ios-worker: std::_Exit, skipping the exit handlers that could
  //! block on the hung device).
  void Run(std::stop_token stop);

  //! Counts so far; safe from any thread.
  WorkerCounters counters() const;
  const DeviceInfo& Device() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ios::worker
