// The ios-worker loop: connects to a coordinator (DEALER), announces its
// device, measures the stage queries it is sent on its backend and answers
// each one. Long-lived: it survives coordinator restarts by reconnecting
// with back-off, following the zguide "Paranoid Pirate" conventions.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>

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
};

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
  //! refuses the endpoint, and after answering the query that met it when
  //! the backend reports its device lost (Backend::Lost).
  void Run(std::stop_token stop);

  //! Counts so far; safe from any thread.
  WorkerCounters counters() const;
  const DeviceInfo& Device() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ios::worker
