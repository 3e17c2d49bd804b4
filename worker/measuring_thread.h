// Internal to worker/: the thread that measures a Worker's stages, one at a
// time, and what it shares with the thread that serves the socket
// (farm_worker.cc). Kept apart so that a measurement that never returns
// (a hung device) can be given up: the measuring thread then touches
// nothing but its MeasuringState.
#pragma once

#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "common/error.h"
#include "devices/backend.h"
#include "schema/protocol.h"

namespace ios::worker::measuring {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// An eventfd the measuring thread writes once per answer and the serving
// thread polls beside its socket. Not a ZeroMQ socket: a measuring thread
// abandoned in a hung measurement keeps it, and a socket it kept would
// block the context's termination forever.
class Doorbell {
 public:
  Doorbell() : fd_(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {
    if (fd_ < 0) throw Error(std::string("worker: eventfd: ") + std::strerror(errno));
  }
  ~Doorbell() { close(fd_); }
  Doorbell(const Doorbell&) = delete;
  Doorbell& operator=(const Doorbell&) = delete;
  int fd() const { return fd_; }
  void Ring() const {
    const uint64_t one = 1;
    // Fails only when the counter is about to overflow: it is ringing anyway.
    (void)!write(fd_, &one, sizeof one);
  }
  void Quiet() const {
    uint64_t count = 0;
    (void)!read(fd_, &count, sizeof count);
  }

 private:
  int fd_;
};

// What the measuring thread shares with the serving thread. Both hold it, so
// a measuring thread abandoned in a hung measurement keeps it (and with it
// the backend) alive after the Worker is gone; it touches nothing else.
struct MeasuringState {
  MeasuringState(std::unique_ptr<devices::Backend> b, std::string id, milliseconds cap)
      : backend(std::move(b)), worker_id(std::move(id)), max_measurement(cap) {}

  const std::unique_ptr<devices::Backend> backend;  // used by the measuring thread only
  const std::string worker_id;
  const milliseconds max_measurement;
  const Doorbell doorbell;  // rung after each answer queued

  std::mutex mutex;               // guards everything below
  std::condition_variable wake;   // a query was queued, or stopping
  std::condition_variable ended;  // the measuring thread has returned
  std::deque<schema::StageQuery> queue;
  std::deque<schema::StageResult> answers;  // for the serving thread to send
  //! The query being measured. Written under `mutex` by the measuring
  //! thread only, which reads it without the lock while measuring.
  std::optional<schema::StageQuery> current;
  Clock::time_point current_deadline;  // of `current`: MeasurementBound after its start
  milliseconds current_bound{0};
  bool stopping = false;
  bool abandoned = false;  // given up: the measuring thread touches nothing when it returns
  bool finished = false;   // the measuring thread has returned
  bool device_lost = false;
  std::string lost_reason;

  std::atomic<int64_t> measured{0}, failed{0};
};

//! The measuring thread's body: one stage at a time, in arrival order,
//! until `stopping`, a lost device, or being abandoned.
void MeasureThread(const std::shared_ptr<MeasuringState>& state) noexcept;

//! "12.5 s".
std::string SecondsText(milliseconds d);

//! What was given up, for the log: `state.current` with its bound, then
//! `when`. Call with `state.mutex` held and `state.current` set.
std::string HungText(const MeasuringState& state, const std::string& when);

}  // namespace ios::worker::measuring
