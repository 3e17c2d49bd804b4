// An ios-worker child process: how the coordinator measures on a device it
// does not link itself (cuda: the coordinator must start on machines
// without CUDA), or in a separate process when asked (--worker-process).
// The child speaks the farm protocol to this coordinator over loopback TCP.
#pragma once

#include <sys/types.h>

#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace ios::coordinator {

//! The ios-worker binary beside this executable (an installed or packed
//! layout) or in the build tree's worker/ directory; empty when neither is
//! there. `self` is this executable's path (default: /proc/self/exe).
std::string FindWorkerBinary(const std::string& self = {});

//! Runs `worker --backend BACKEND --check-device` and waits for it: empty
//! when the device opens, else the child's own error line (or why it could
//! not run). What a search checks before it starts a child that would
//! otherwise fail out of sight.
std::string CheckDeviceInWorker(const std::string& worker, const std::string& backend);

//! A long-lived ios-worker child connected to `endpoint`. Stopped (SIGTERM,
//! then SIGKILL after a grace period) and reaped when the object goes.
class WorkerProcess {
 public:
  //! Starts `worker` with `args`. Throws ios::Error when it cannot be
  //! started.
  WorkerProcess(const std::string& worker, const std::vector<std::string>& args);
  ~WorkerProcess();
  WorkerProcess(const WorkerProcess&) = delete;
  WorkerProcess& operator=(const WorkerProcess&) = delete;

  //! The exit status once the child has ended (never blocks).
  std::optional<int> Exited();
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
  std::optional<int> status_;
};

//! A WorkerProcess started again whenever it exits on its own (a worker
//! whose GPU hit a sticky error exits so that a fresh process, with a fresh
//! CUDA context, takes over; the farm requeues what the old one held), at
//! most `max_restarts` times. Watched by a thread it owns; the child is
//! stopped when the object goes.
class SupervisedWorker {
 public:
  //! Starts the first child. Throws ios::Error when it cannot be started.
  SupervisedWorker(std::string worker, std::vector<std::string> args, int max_restarts = 3);
  ~SupervisedWorker();
  SupervisedWorker(const SupervisedWorker&) = delete;
  SupervisedWorker& operator=(const SupervisedWorker&) = delete;

  pid_t pid() const;
  int restarts() const;

 private:
  void Watch();

  const std::string worker_;
  const std::vector<std::string> args_;
  const int max_restarts_;
  mutable std::mutex mutex_;
  std::condition_variable stop_;
  bool stopping_ = false;
  int restarts_ = 0;
  std::unique_ptr<WorkerProcess> process_;
  std::thread watcher_;  // last: starts once the rest is set up
};

//! `endpoint` as a client on this host reaches it: a wildcard host
//! ("tcp://*:5555", "tcp://0.0.0.0:5555") becomes 127.0.0.1.
std::string LoopbackTo(const std::string& endpoint);

}  // namespace ios::coordinator
