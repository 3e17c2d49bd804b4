#include "devices/cpu/cpu_lanes.h"

#include <omp.h>
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <utility>

#include "common/error.h"
#include "common/process_cpus.h"

namespace ios::devices {

std::vector<LaneShare> SplitCores(int threads, const std::vector<int>& cpus, int lanes) {
  if (threads < 1 || lanes < 1) throw Error("SplitCores: threads and lanes must be >= 1");
  std::vector<LaneShare> shares(lanes);
  if (lanes > threads) return shares;  // one thread each, unpinned
  const bool pin = lanes > 1 && threads <= static_cast<int>(cpus.size());
  int next_cpu = 0;
  for (int i = 0; i < lanes; ++i) {
    shares[i].threads = threads / lanes + (i < threads % lanes ? 1 : 0);
    if (!pin) continue;
    shares[i].cpus.assign(cpus.begin() + next_cpu, cpus.begin() + next_cpu + shares[i].threads);
    next_cpu += shares[i].threads;
  }
  return shares;
}

std::vector<int> AllowedCpus() { return ProcessCpus(); }

LaneThread::LaneThread(LaneShare share) : share_(std::move(share)) {
  // Pin before the thread runs anything: the OpenMP team it creates later
  // inherits the affinity of the thread that creates it.
  std::unique_lock lock(mutex_);
  busy_ = true;
  thread_ = std::thread([this] { Body(); });
  changed_.wait(lock, [this] { return !busy_; });
}

LaneThread::~LaneThread() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  changed_.notify_all();
  thread_.join();
}

void LaneThread::Post(const std::function<void()>& job) {
  {
    std::lock_guard lock(mutex_);
    if (busy_) throw Error("LaneThread: a job is already running");
    job_ = &job;
    busy_ = true;
  }
  changed_.notify_all();
}

void LaneThread::Wait() {
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [this] { return !busy_; });
  if (error_) {
    std::exception_ptr error = std::exchange(error_, nullptr);
    std::rethrow_exception(error);
  }
}

void LaneThread::Body() {
  // Set-up, under the lock the constructor waits on.
  {
    std::lock_guard lock(mutex_);
    if (!share_.cpus.empty()) {
      cpu_set_t set;
      CPU_ZERO(&set);
      for (int cpu : share_.cpus) CPU_SET(cpu, &set);
      pthread_setaffinity_np(pthread_self(), sizeof(set), &set);  // best effort
    }
    omp_set_num_threads(share_.threads);
    busy_ = false;
  }
  changed_.notify_all();
  std::unique_lock lock(mutex_);
  while (true) {
    changed_.wait(lock, [this] { return stop_ || job_ != nullptr; });
    if (job_ == nullptr) return;  // stopping with nothing to do
    const std::function<void()>* job = std::exchange(job_, nullptr);
    lock.unlock();
    std::exception_ptr error;
    try {
      (*job)();
    } catch (...) {
      error = std::current_exception();
    }
    lock.lock();
    error_ = error;
    busy_ = false;
    changed_.notify_all();
  }
}

}  // namespace ios::devices
