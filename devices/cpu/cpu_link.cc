#include "devices/cpu/cpu_link.h"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <mutex>
#include <new>
#include <optional>
#include <thread>

#include "common/error.h"
#include "common/process_cpus.h"
#include "hios/link.h"

namespace ios::devices {
namespace {

using Clock = std::chrono::steady_clock;

// Empty when pinned (or nothing to pin to); otherwise why not.
std::string PinTo(const std::vector<int>& cores) {
  if (cores.empty()) return {};
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int core : cores) CPU_SET(core, &set);
  const int status = pthread_setaffinity_np(pthread_self(), sizeof set, &set);
  return status == 0 ? std::string() : std::string("pthread_setaffinity_np: ") + strerror(status);
}

std::string QueryProblem(const LinkQuery& query) {
  if (query.bytes.empty()) return "no copy sizes";
  if (query.bytes.size() > static_cast<size_t>(kMaxLinkSizes)) {
    return std::to_string(query.bytes.size()) + " copy sizes, at most " +
           std::to_string(kMaxLinkSizes);
  }
  for (int64_t bytes : query.bytes) {
    if (bytes < 1 || bytes > kMaxLinkBytes) {
      return "a copy of " + std::to_string(bytes) + " bytes; expected 1 to " +
             std::to_string(kMaxLinkBytes);
    }
  }
  if (query.repeats < 1 || query.repeats > kMaxLinkRepeats) {
    return std::to_string(query.repeats) + " repeats; expected 1 to " +
           std::to_string(kMaxLinkRepeats);
  }
  return {};
}

LinkMeasurement Failed(MeasureError error, const std::string& why) {
  LinkMeasurement m;
  m.error = error;
  m.error_message = "cpu link: " + why;
  return m;
}

// The two sides of the copy, one round at a time. The producer writes the
// source, stamps the start and copies it into staging; the consumer copies
// staging out and stamps the end. Rounds never overlap: the producer waits
// for the consumer's end before it starts the next.
struct HostLinkRun {
  std::vector<int64_t> rounds;  // bytes per round, warm-ups included
  char *source = nullptr, *staging = nullptr, *target = nullptr;
  std::vector<double> ms;  // per round
  Clock::time_point start;
  std::atomic<int64_t> staged{-1}, done{-1};
  std::atomic<bool> abort{false};
  std::string problem[2];

  // False when the other side gave up.
  template <typename Ready>
  bool WaitFor(Ready ready) const {
    while (!ready()) {
      if (abort.load(std::memory_order_acquire)) return false;
      std::this_thread::yield();
    }
    return true;
  }

  void Producer(const std::vector<int>& cores) noexcept {
    if (problem[0] = PinTo(cores); !problem[0].empty()) return abort.store(true);
    for (int64_t r = 0; r < static_cast<int64_t>(rounds.size()); ++r) {
      const auto bytes = static_cast<size_t>(rounds[static_cast<size_t>(r)]);
      std::memset(source, static_cast<int>(r & 0x7f), bytes);
      start = Clock::now();
      std::memcpy(staging, source, bytes);
      staged.store(r, std::memory_order_release);
      if (!WaitFor([&] { return done.load(std::memory_order_acquire) >= r; })) return;
    }
  }

  void Consumer(const std::vector<int>& cores) noexcept {
    if (problem[1] = PinTo(cores); !problem[1].empty()) return abort.store(true);
    for (int64_t r = 0; r < static_cast<int64_t>(rounds.size()); ++r) {
      if (!WaitFor([&] { return staged.load(std::memory_order_acquire) >= r; })) return;
      const auto bytes = static_cast<size_t>(rounds[static_cast<size_t>(r)]);
      std::memcpy(target, staging, bytes);
      // Read what arrived, as the consuming device's operator would.
      volatile char last = target[bytes - 1];
      (void)last;
      ms[static_cast<size_t>(r)] =
          std::chrono::duration<double, std::milli>(Clock::now() - start).count();
      done.store(r, std::memory_order_release);
    }
  }
};

class CpuLinkBackend final : public Backend {
 public:
  CpuLinkBackend(std::unique_ptr<Backend> stages, std::vector<std::vector<int>> groups)
      : stages_(std::move(stages)), groups_(std::move(groups)) {}

  const DeviceInfo& Device() const override { return stages_->Device(); }
  MeasureResult Measure(const StageSpec& stage, int batch_size,
                        const MeasureSettings& settings) override {
    return stages_->Measure(stage, batch_size, settings);
  }
  MeasureResult MeasureNetwork(const NetworkSpec& network, int batch_size,
                               const MeasureSettings& settings) override {
    return stages_->MeasureNetwork(network, batch_size, settings);
  }
  bool Lost() const override { return stages_->Lost(); }
  int Devices() const override { return static_cast<int>(groups_.size()); }

  std::vector<LinkFigures> Links() const override {
    std::lock_guard lock(mutex_);
    if (measured_) return {*measured_};
    const hios::Link preset = hios::PresetLink(hios::LinkKind::kHost);
    return {{hios::ToString(preset.kind), preset.gb_per_s, preset.latency_us, false}};
  }

  LinkMeasurement MeasureLink(const LinkQuery& query) override {
    LinkMeasurement m = MeasureHostLink(query, groups_[0], groups_[1]);
    if (m.ok()) {
      std::lock_guard lock(mutex_);
      measured_ = LinkFigures{m.kind, m.gb_per_s, m.latency_us, true};
    }
    return m;
  }

 private:
  std::unique_ptr<Backend> stages_;
  const std::vector<std::vector<int>> groups_;
  mutable std::mutex mutex_;  // guards measured_: Links() may come from any thread
  std::optional<LinkFigures> measured_;
};

}  // namespace

std::vector<int> AllowedCores() { return ProcessCpus(); }

std::vector<std::vector<int>> SplitCores(const std::vector<int>& cores, int groups) {
  if (groups < 1) throw Error("cpu: devices must be >= 1, got " + std::to_string(groups));
  if (cores.size() < static_cast<size_t>(groups)) {
    throw Error("cpu: " + std::to_string(groups) + " devices need as many cores; this process " +
                "may run on " + std::to_string(cores.size()));
  }
  std::vector<std::vector<int>> split(static_cast<size_t>(groups));
  const size_t n = cores.size(), k = split.size();
  for (size_t g = 0; g < k; ++g) {
    split[g].assign(cores.begin() + static_cast<std::ptrdiff_t>(g * n / k),
                    cores.begin() + static_cast<std::ptrdiff_t>((g + 1) * n / k));
  }
  return split;
}

LinkMeasurement MeasureHostLink(const LinkQuery& query, const std::vector<int>& from,
                                const std::vector<int>& to) {
  if (const std::string problem = QueryProblem(query); !problem.empty()) {
    return Failed(MeasureError::kUnsupported, problem);
  }
  try {
    HostLinkRun run;
    for (int64_t bytes : query.bytes) {
      for (int k = 0; k <= query.repeats; ++k) run.rounds.push_back(bytes);  // k 0: warm-up
    }
    run.ms.assign(run.rounds.size(), 0);
    const auto largest =
        static_cast<size_t>(*std::max_element(query.bytes.begin(), query.bytes.end()));
    std::unique_ptr<char[]> source, staging, target;
    try {
      source = std::make_unique_for_overwrite<char[]>(largest);
      staging = std::make_unique_for_overwrite<char[]>(largest);
      target = std::make_unique_for_overwrite<char[]>(largest);
    } catch (const std::bad_alloc&) {
      return Failed(MeasureError::kOutOfMemory,
                    "cannot allocate 3 buffers of " + std::to_string(largest) + " bytes");
    }
    run.source = source.get();
    run.staging = staging.get();
    run.target = target.get();
    {
      std::jthread producer([&] { run.Producer(from); });
      try {
        std::jthread consumer([&] { run.Consumer(to); });
      } catch (...) {
        run.abort.store(true);  // the producer must not wait for a consumer that never came
        throw;
      }
    }  // both joined
    for (const std::string& problem : run.problem) {
      if (!problem.empty()) return Failed(MeasureError::kBackendFailure, problem);
    }
    LinkMeasurement m;
    m.kind = hios::ToString(hios::LinkKind::kHost);
    size_t round = 0;
    for (int64_t bytes : query.bytes) {
      ++round;  // the warm-up
      std::vector<double> times(
          run.ms.begin() + static_cast<std::ptrdiff_t>(round),
          run.ms.begin() + static_cast<std::ptrdiff_t>(round) + query.repeats);
      round += static_cast<size_t>(query.repeats);
      std::sort(times.begin(), times.end());
      const size_t mid = times.size() / 2;
      const double median = times.size() % 2 == 1 ? times[mid] : (times[mid - 1] + times[mid]) / 2;
      m.samples.push_back({bytes, median, times.back() - times.front()});
    }
    try {
      const LinkFit fit = FitLink(m.samples);
      m.latency_us = fit.latency_us;
      m.gb_per_s = fit.gb_per_s;
    } catch (const Error& e) {
      LinkMeasurement failed = Failed(MeasureError::kBackendFailure, e.what());
      failed.samples = std::move(m.samples);  // what was timed, for the record
      return failed;
    }
    return m;
  } catch (const std::exception& e) {
    // Threads that cannot start, or memory for the bookkeeping.
    return Failed(MeasureError::kBackendFailure, e.what());
  }
}

std::unique_ptr<Backend> MakeCpuLinkBackend(std::unique_ptr<Backend> stage_backend, int devices) {
  return std::make_unique<CpuLinkBackend>(std::move(stage_backend),
                                          SplitCores(AllowedCores(), devices));
}

BackendKind WithCpuLinks(BackendKind kind) {
  kind.open_backend = [open = kind.open_backend](const std::string& name,
                                                 const BackendOptions& options) {
    if (options.devices < 1) {
      throw Error("backend '" + name + "': devices must be >= 1, got " +
                  std::to_string(options.devices));
    }
    std::unique_ptr<Backend> backend = open(name, options);
    if (options.devices == 1) return backend;
    return MakeCpuLinkBackend(std::move(backend), options.devices);
  };
  return kind;
}

}  // namespace ios::devices
