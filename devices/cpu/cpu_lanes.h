// The threads of the cpu backend: how a stage's lanes share the thread
// budget and the cores (the core-split policy, docs/cpu-backend.md), and the
// persistent thread that runs one lane's work, run after run.
#pragma once

#include <condition_variable>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace ios::devices {

//! What one lane of a stage gets: its OpenMP thread count and the cores its
//! thread is pinned to (empty: not pinned).
struct LaneShare {
  int threads = 1;
  std::vector<int> cpus;
  friend bool operator==(const LaneShare&, const LaneShare&) = default;
};

//! The core-split policy. `threads` is the budget (>= 1), `cpus` the cores
//! the process may use, `lanes` (>= 1) the lanes of a stage.
//!   - lanes <= threads: lane i gets floor(threads/lanes) threads, one more
//!     for the first threads % lanes lanes; when the budget fits on the
//!     cores (threads <= cpus.size()) and there are several lanes, lane i is
//!     pinned to its own contiguous run of the first `threads` cores.
//!   - lanes > threads: one thread per lane, none pinned (the cores are
//!     oversubscribed anyway; the kernel balances them).
//! A single lane is never pinned: it runs on the caller's thread.
std::vector<LaneShare> SplitCores(int threads, const std::vector<int>& cpus, int lanes);

//! The cores this process may run on (sched_getaffinity), ascending; never
//! empty (falls back to 0..hardware_concurrency-1).
std::vector<int> AllowedCpus();

//! One persistent thread for one lane: it pins itself to its share's cores
//! (a refused pinning, e.g. by a container's cpuset, leaves it unpinned),
//! sets its OpenMP thread count (before any primitive is created on it, as
//! oneDNN fixes the count at creation), then runs posted jobs one at a time.
//! A job's exception is caught on the thread and rethrown by Wait. Owned:
//! the destructor stops and joins the thread.
class LaneThread {
 public:
  explicit LaneThread(LaneShare share);
  ~LaneThread();
  LaneThread(const LaneThread&) = delete;
  LaneThread& operator=(const LaneThread&) = delete;

  //! Starts `job` on the thread; `job` must outlive the matching Wait. At
  //! most one job is in flight.
  void Post(const std::function<void()>& job);
  //! Waits for the posted job (returns at once if none) and rethrows what it
  //! threw.
  void Wait();

 private:
  void Body();

  LaneShare share_;
  std::mutex mutex_;
  std::condition_variable changed_;
  const std::function<void()>* job_ = nullptr;  // guarded by mutex_
  bool busy_ = false;                           // a job posted and not finished
  bool stop_ = false;
  std::exception_ptr error_;
  std::thread thread_;  // last: starts after every other member exists
};

}  // namespace ios::devices
