#include "run/multi_device_run.h"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <condition_variable>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>

#include "common/error.h"
#include "common/printable.h"
#include "devices/cuda/cuda_multi.h"
#include "exec/multi_program.h"
#include "exec/program.h"

namespace ios::run {
namespace {

using coordinator::Transfer;
using Clock = std::chrono::steady_clock;

// A device that stopped because another failed: the other's error is the
// one to report.
class Stopped : public Error {
 public:
  using Error::Error;
};

// Where copies meet their readers: one staging buffer per copy, and the
// barrier that starts a run on every device at once. A copy's values stay
// until every device has finished the run it belongs to, so a reader may
// use them without the lock.
class Exchange {
 public:
  Exchange(size_t copies, int devices) : boxes_(copies), parties_(devices) {}

  void Deliver(size_t copy, int64_t run, std::vector<float> values) {
    {
      std::lock_guard lock(mutex_);
      boxes_[copy].values = std::move(values);
      boxes_[copy].run = run;
    }
    changed_.notify_all();
  }

  //! The values of `copy` in `run`, once delivered. Throws naming it
  //! (`what`) after `timeout`, or Stopped when another device failed.
  const std::vector<float>& Await(size_t copy, int64_t run, std::chrono::milliseconds timeout,
                                  const std::string& what) {
    std::unique_lock lock(mutex_);
    const bool arrived =
        changed_.wait_for(lock, timeout, [&] { return stopped_ || boxes_[copy].run >= run; });
    if (stopped_) throw Stopped(reason_);
    if (!arrived) {
      throw Error(what + " did not arrive within " + std::to_string(timeout.count()) + " ms (run " +
                  std::to_string(run) + ")");
    }
    return boxes_[copy].values;
  }

  //! Returns when every device has arrived. No timeout of its own: a device
  //! that never arrives is waiting for a copy, and that wait times out.
  void Barrier() {
    std::unique_lock lock(mutex_);
    const int64_t generation = generation_;
    if (++arrived_ == parties_) {
      arrived_ = 0;
      ++generation_;
      changed_.notify_all();
      return;
    }
    changed_.wait(lock, [&] { return stopped_ || generation_ != generation; });
    if (stopped_) throw Stopped(reason_);
  }

  //! Wakes every waiter with Stopped(reason); later waits throw at once.
  void Stop(const std::string& reason) {
    {
      std::lock_guard lock(mutex_);
      if (!stopped_) reason_ = reason;
      stopped_ = true;
    }
    changed_.notify_all();
  }

 private:
  struct Box {
    std::vector<float> values;
    int64_t run = 0;  // the run that delivered them; 0: none yet
  };
  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<Box> boxes_;
  const int parties_;
  int arrived_ = 0;
  int64_t generation_ = 0;
  bool stopped_ = false;
  std::string reason_;
};

// The thread that owns one device for a whole multi-device run: pinned to
// the device's cores before it does anything (an OpenMP team it creates
// inherits that), it runs posted jobs one at a time and hands back what
// they threw. Owned: the destructor joins it.
class DeviceThread {
 public:
  explicit DeviceThread(std::vector<int> cpus) : thread_([this, cpus] { Body(cpus); }) {}
  ~DeviceThread() {
    {
      std::lock_guard lock(mutex_);
      quit_ = true;
    }
    changed_.notify_all();
    thread_.join();
  }
  DeviceThread(const DeviceThread&) = delete;
  DeviceThread& operator=(const DeviceThread&) = delete;

  void Post(std::function<void()> job) {
    {
      std::lock_guard lock(mutex_);
      job_ = std::move(job);
      busy_ = true;
    }
    changed_.notify_all();
  }
  //! Waits for the posted job; what it threw, or null.
  std::exception_ptr Wait() {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [this] { return !busy_; });
    return std::exchange(error_, nullptr);
  }

 private:
  void Body(const std::vector<int>& cpus) {
    if (!cpus.empty()) {
      cpu_set_t set;
      CPU_ZERO(&set);
      for (int cpu : cpus) CPU_SET(cpu, &set);
      // Best effort, as the cpu device's own lanes: a container's cpuset may
      // refuse it, and the run is still correct.
      pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
    }
    std::unique_lock lock(mutex_);
    while (true) {
      changed_.wait(lock, [this] { return quit_ || job_ != nullptr; });
      if (job_ == nullptr) return;
      std::function<void()> job = std::exchange(job_, nullptr);
      lock.unlock();
      std::exception_ptr error;
      try {
        job();
      } catch (...) {
        error = std::current_exception();
      }
      lock.lock();
      error_ = error;
      busy_ = false;
      changed_.notify_all();
    }
  }

  std::mutex mutex_;
  std::condition_variable changed_;
  std::function<void()> job_;  // guarded by mutex_
  bool busy_ = false, quit_ = false;
  std::exception_ptr error_;
  std::thread thread_;  // last: starts once the members above exist
};

// One device's part: its program and when it receives and sends.
struct DevicePart {
  exec::Device* device = nullptr;
  std::string name;
  exec::DeviceProgram program;
  std::unique_ptr<exec::PreparedProgram> prepared;
  //! Per stage: (buffer, copy) to write before it runs.
  std::vector<std::vector<std::pair<int, size_t>>> receive_before;
  //! Per stage: (view, copies) to read out after it has run.
  std::vector<std::vector<std::pair<exec::View, std::vector<size_t>>>> send_after;
};

std::string DeviceText(const std::vector<DevicePart>& parts, int d) {
  return "device " + std::to_string(d) + " (" + Printable(parts[static_cast<size_t>(d)].name) + ")";
}

class MultiDeviceRunner {
 public:
  MultiDeviceRunner(const std::vector<exec::Device*>& devices, const Graph& graph,
                    const coordinator::MultiDeviceSchedule& schedule,
                    const exec::WeightStore& weights, const MultiRunOptions& options)
      : graph_(graph),
        options_(options),
        transfers_(coordinator::MultiTransfers(graph, schedule, options.batch)),
        exchange_(transfers_.size(), static_cast<int>(devices.size())),
        together_(devices::AreCudaDevices(devices)) {
    for (size_t d = 0; d < devices.size(); ++d) {
      DevicePart& part = parts_.emplace_back();
      part.device = devices[d];
      part.name = schedule.devices[d];
      exec::DeviceProgramIo io;
      for (const Transfer& t : transfers_) {
        if (t.to == static_cast<int>(d)) io.received.push_back(t.producer);
        if (t.from == static_cast<int>(d) && (io.sent.empty() || io.sent.back() != t.producer)) {
          io.sent.push_back(t.producer);
        }
      }
      try {
        part.program = exec::BuildDeviceProgram(graph, schedule.stages[d], weights, io);
      } catch (const Error& e) {
        throw Error(DeviceText(parts_, static_cast<int>(d)) + ": " + e.what());
      }
      const size_t stages = part.program.program.stages.size();
      part.receive_before.resize(stages);
      part.send_after.resize(stages);
      for (const exec::ReceivedTensor& r : part.program.received) {
        part.receive_before[static_cast<size_t>(r.first_stage)].emplace_back(
            r.buffer, CopyIndex(r.node, static_cast<int>(d)));
      }
      for (const exec::SentTensor& s : part.program.sent) {
        std::vector<size_t> copies;
        for (size_t t = 0; t < transfers_.size(); ++t) {
          if (transfers_[t].producer == s.node && transfers_[t].from == static_cast<int>(d)) {
            copies.push_back(t);
          }
        }
        part.send_after[static_cast<size_t>(s.stage)].emplace_back(s.view, std::move(copies));
      }
      if (part.program.output) output_device_ = static_cast<int>(d);
      if (!together_) threads_.push_back(std::make_unique<DeviceThread>(devices[d]->HostCpus()));
    }
  }

  const std::vector<Transfer>& transfers() const { return transfers_; }
  const std::vector<DevicePart>& parts() const { return parts_; }
  bool together() const { return together_; }

  void Prepare(std::span<const float> input) {
    if (together_) {
      PrepareTogether(input);
      return;
    }
    OnEveryDevice([&](int d) {
      DevicePart& part = parts_[static_cast<size_t>(d)];
      part.prepared = part.device->Prepare(part.program.program, options_.batch);
      if (part.program.input >= 0) part.prepared->Write(part.program.input, input);
    });
  }

  //! `runs` whole runs; returns their elapsed milliseconds.
  double Runs(int runs) {
    if (together_) return played_->TimedRuns(runs);
    const int64_t first = next_run_;
    next_run_ += runs;
    const auto start = Clock::now();
    OnEveryDevice([&](int d) {
      for (int64_t run = first; run < first + runs; ++run) {
        exchange_.Barrier();
        Play(d, run);
      }
    });
    return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  }

  std::vector<float> ReadOutput() {
    if (together_) {
      return played_->Read(output_device_,
                           *parts_[static_cast<size_t>(output_device_)].program.output);
    }
    std::vector<float> output;
    OnEveryDevice([&](int d) {
      if (d != output_device_) return;
      const DevicePart& part = parts_[static_cast<size_t>(d)];
      output = part.prepared->Read(*part.program.output);
    });
    return output;
  }

 private:
  // Devices that play the whole run themselves from this thread (cuda:
  // streams and events across GPUs, peer copies), given every program and
  // the copies between them.
  void PrepareTogether(std::span<const float> input) {
    std::vector<exec::Device*> devices;
    std::vector<const exec::Program*> programs;
    for (const DevicePart& part : parts_) {
      devices.push_back(part.device);
      programs.push_back(&part.program.program);
    }
    std::vector<exec::ProgramCopy> copies;
    for (size_t t = 0; t < transfers_.size(); ++t) {
      const Transfer& transfer = transfers_[t];
      exec::ProgramCopy& copy = copies.emplace_back();
      copy.from = transfer.from;
      copy.to = transfer.to;
      copy.label = CopyText(t);
      for (const exec::SentTensor& s : parts_[static_cast<size_t>(transfer.from)].program.sent) {
        if (s.node != transfer.producer) continue;
        copy.source = s.view;
        copy.after_stage = s.stage;
      }
      for (const exec::ReceivedTensor& r :
           parts_[static_cast<size_t>(transfer.to)].program.received) {
        if (r.node != transfer.producer) continue;
        copy.buffer = r.buffer;
        copy.before_stage = r.first_stage;
      }
    }
    played_ = devices::PrepareCudaMultiProgram(devices, programs, copies, options_.batch);
    for (size_t d = 0; d < parts_.size(); ++d) {
      if (parts_[d].program.input >= 0) {
        played_->Write(static_cast<int>(d), parts_[d].program.input, input);
      }
    }
  }

  size_t CopyIndex(NodeId producer, int to) const {
    for (size_t t = 0; t < transfers_.size(); ++t) {
      if (transfers_[t].producer == producer && transfers_[t].to == to) return t;
    }
    throw Error("multi-device run: no copy of " + Quoted(graph_.node(producer).name) +
                " to device " + std::to_string(to));
  }

  std::string CopyText(size_t t) const {
    const Transfer& copy = transfers_[t];
    return "the copy of " + Quoted(graph_.node(copy.producer).name) + " from " +
           DeviceText(parts_, copy.from) + " to " + DeviceText(parts_, copy.to);
  }

  // One run of device d's stages: pieces between the stages that receive
  // before they run or send after.
  void Play(int d, int64_t run) {
    DevicePart& part = parts_[static_cast<size_t>(d)];
    const int stages = static_cast<int>(part.receive_before.size());
    for (int k = 0; k < stages;) {
      for (const auto& [buffer, copy] : part.receive_before[static_cast<size_t>(k)]) {
        part.prepared->Write(buffer,
                             exchange_.Await(copy, run, options_.transfer_timeout, CopyText(copy)));
      }
      int end = k + 1;
      while (end < stages && part.send_after[static_cast<size_t>(end - 1)].empty() &&
             part.receive_before[static_cast<size_t>(end)].empty()) {
        ++end;
      }
      part.prepared->RunStages(k, end);
      for (const auto& [view, copies] : part.send_after[static_cast<size_t>(end - 1)]) {
        std::vector<float> values = part.prepared->Read(view);
        for (size_t i = 0; i < copies.size(); ++i) {
          if (options_.drop && options_.drop(transfers_[copies[i]])) continue;
          exchange_.Deliver(copies[i], run, i + 1 == copies.size() ? std::move(values) : values);
        }
      }
      k = end;
    }
  }

  // Runs job(d) on every device's thread at once and waits for all. A
  // device that fails stops the others; its error is thrown, naming it.
  void OnEveryDevice(const std::function<void(int d)>& job) {
    for (size_t d = 0; d < threads_.size(); ++d) {
      threads_[d]->Post([this, &job, d] {
        try {
          job(static_cast<int>(d));
        } catch (const Stopped&) {
          throw;
        } catch (const std::exception& e) {
          exchange_.Stop(DeviceText(parts_, static_cast<int>(d)) + " failed");
          throw Error(DeviceText(parts_, static_cast<int>(d)) + ": " + e.what());
        } catch (...) {
          exchange_.Stop(DeviceText(parts_, static_cast<int>(d)) + " failed");
          throw Error(DeviceText(parts_, static_cast<int>(d)) + ": an unknown exception");
        }
      });
    }
    std::exception_ptr failure, stopped;
    for (auto& thread : threads_) {
      std::exception_ptr error = thread->Wait();
      if (!error) continue;
      try {
        std::rethrow_exception(error);
      } catch (const Stopped&) {
        if (!stopped) stopped = error;
      } catch (...) {
        if (!failure) failure = error;
      }
    }
    if (failure) std::rethrow_exception(failure);
    if (stopped) std::rethrow_exception(stopped);
  }

  const Graph& graph_;
  const MultiRunOptions options_;
  const std::vector<Transfer> transfers_;
  Exchange exchange_;
  std::vector<DevicePart> parts_;
  int output_device_ = -1;
  int64_t next_run_ = 1;
  const bool together_;
  std::unique_ptr<exec::PreparedMultiProgram> played_;  // when together_
  std::vector<std::unique_ptr<DeviceThread>> threads_;  // last: joined before the rest goes
};

}  // namespace

MultiDeviceExecution ExecuteMultiDevice(const std::vector<exec::Device*>& devices,
                                        const Graph& graph,
                                        const coordinator::MultiDeviceSchedule& schedule,
                                        const exec::WeightStore& weights,
                                        std::span<const float> input, const MeasureSettings* timing,
                                        const MultiRunOptions& options) {
  coordinator::CheckMultiSchedule(graph, schedule, "multi-device schedule of " + graph.name);
  if (devices.size() != schedule.devices.size() ||
      std::find(devices.begin(), devices.end(), nullptr) != devices.end()) {
    throw Error("multi-device run: " + std::to_string(devices.size()) +
                " devices given for a schedule over " + std::to_string(schedule.devices.size()));
  }
  const Shape& in = graph.node(0).output;
  const size_t input_count = static_cast<size_t>(options.batch) * in.c * in.h * in.w;
  if (options.batch < 1 || input.size() != input_count) {
    throw Error("multi-device run: " + std::to_string(input.size()) + " input values, " +
                std::to_string(input_count) + " expected at batch " +
                std::to_string(options.batch));
  }
  MultiDeviceRunner runner(devices, graph, schedule, weights, options);
  runner.Prepare(input);
  runner.Runs(1);
  MultiDeviceExecution execution;
  execution.output = runner.ReadOutput();
  execution.output_shape = graph.nodes.back().output;
  execution.transfers = runner.transfers();
  execution.device_copies = runner.together();
  for (const DevicePart& part : runner.parts()) {
    DeviceRunSummary summary;
    summary.name = part.name;
    for (const Stage& stage : schedule.stages[execution.devices.size()]) {
      summary.operators += stage.OperatorCount();
    }
    summary.stages = static_cast<int>(part.program.program.stages.size());
    for (const exec::ProgramStage& stage : part.program.program.stages) {
      for (const exec::Lane& lane : stage.lanes) {
        summary.steps += static_cast<int>(lane.steps.size());
      }
    }
    summary.received = static_cast<int>(part.program.received.size());
    for (const auto& sends : part.send_after) {
      for (const auto& [view, copies] : sends) summary.sent += static_cast<int>(copies.size());
    }
    summary.memory = part.program.memory;
    execution.devices.push_back(std::move(summary));
  }
  if (timing != nullptr) {
    execution.timing = TimeRuns(*timing, [&](int runs) { return runner.Runs(runs); });
  }
  return execution;
}

}  // namespace ios::run
