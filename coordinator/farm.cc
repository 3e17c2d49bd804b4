// The farm's public face: set-up (sockets, CURVE, embedded workers) and the
// caller-side Measurer methods. The router thread is in farm_router.cc.
#include "coordinator/farm.h"

#include <spdlog/spdlog.h>

#include <thread>
#include <zmq.hpp>

#include "common/error.h"
#include "coordinator/farm_router.h"
#include "net/context.h"
#include "net/curve.h"
#include "schema/protocol.h"
#include "worker/farm_worker.h"

namespace ios::coordinator {

namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// Embedded workers sit next to the router, so a deeper queue costs nothing
// and hides the thread hand-offs of each round trip (a remote worker's
// default of 2 is about not hoarding work another GPU could take).
constexpr int kLocalWorkerCapacity = 8;

class FarmImpl final : public Farm {
 public:
  explicit FarmImpl(const FarmOptions& options) : options_(options) {
    if (options_.min_workers < 0) throw Error("--min-workers must be >= 0");
    if (options_.local_workers < 0) throw Error("--local-workers must be >= 0");
    if (options_.max_attempts < 1) throw Error("max attempts must be >= 1");
    if (options_.bind.empty() && options_.local_workers == 0) {
      throw Error("no workers: give --bind ENDPOINT for remote workers or --local-workers N");
    }
    if (options_.device.starts_with("sim:")) {
      // The coordinator can name a simulated device itself, so a search
      // whose stages are all in the DB needs no worker at all.
      shared_.device = worker::CreateBackend(options_.device)->Device();
    }
    router_ = zmq::socket_t(context_.zmq(), zmq::socket_type::router);
    router_.set(zmq::sockopt::router_mandatory, 1);
    router_.set(zmq::sockopt::linger, 0);
    router_.set(zmq::sockopt::maxmsgsize, static_cast<int64_t>(schema::kMaxMessageBytes));
    if (!options_.curve_secret_key_file.empty() || !options_.curve_allow_dir.empty()) {
      if (options_.curve_secret_key_file.empty() || options_.curve_allow_dir.empty()) {
        throw Error("CURVE needs both --curve-secret-key and --curve-allow");
      }
      const net::CurveKeyPair keys = net::LoadKeyFile(options_.curve_secret_key_file);
      if (keys.secret_key.empty()) {
        throw Error(options_.curve_secret_key_file + ": holds no secret key; give the .key file");
      }
      if (options_.local_workers > 0) {
        // Embedded workers reach the router over inproc://, where no CURVE
        // handshake can vouch for them.
        throw Error(
            "CURVE (--curve-secret-key) cannot be combined with --local-workers; run "
            "ios-worker processes with their own keys instead");
      }
      auto allowed = net::LoadAllowList(options_.curve_allow_dir);
      spdlog::info("CURVE on: {} worker key(s) allowed from {}", allowed.size(),
                   options_.curve_allow_dir);
      authenticator_ = std::make_unique<net::CurveAuthenticator>(context_, std::move(allowed));
      net::MakeCurveServer(router_, keys);
    }
    if (!options_.bind.empty()) {
      try {
        router_.bind(options_.bind);
      } catch (const zmq::error_t& e) {
        throw Error("cannot bind '" + options_.bind + "': " + e.what());
      }
      bound_ = router_.get(zmq::sockopt::last_endpoint);
      spdlog::info("listening for workers on {}", bound_);
    }
    const std::string inproc =
        "inproc://ios-farm-" + std::to_string(reinterpret_cast<uintptr_t>(this));
    if (options_.local_workers > 0) router_.bind(inproc);
    control_api_ = zmq::socket_t(context_.zmq(), zmq::socket_type::pair);
    control_router_ = zmq::socket_t(context_.zmq(), zmq::socket_type::pair);
    control_router_.bind(inproc + "-control");
    control_api_.connect(inproc + "-control");
    router_thread_ =
        std::thread([this] { detail::RunFarmRouter(options_, shared_, router_, control_router_); });
    for (int i = 0; i < options_.local_workers; ++i) {
      worker::WorkerOptions worker_options;
      worker_options.endpoint = inproc;
      worker_options.worker_id = "local-" + std::to_string(i + 1);
      worker_options.heartbeat = options_.heartbeat;
      worker_options.liveness = options_.liveness;
      worker_options.announce = false;
      worker_options.capacity = kLocalWorkerCapacity;
      auto local = std::make_unique<worker::Worker>(
          context_, worker::CreateBackend(options_.local_backend, options_.local_backend_options),
          worker_options);
      worker::Worker& w = *local;
      local_workers_.push_back(std::move(local));
      local_threads_.emplace_back([&w](std::stop_token stop) { w.Run(stop); });
    }
  }

  ~FarmImpl() override {
    // Embedded workers first, so they end quietly instead of going back to
    // waiting for a next coordinator when the router says goodbye.
    for (auto& thread : local_threads_) thread.request_stop();
    SendControl("s");
    if (router_thread_.joinable()) router_thread_.join();
    local_threads_.clear();  // joins
  }

  const DeviceInfo& Device() const override {
    std::unique_lock lock(shared_.mutex);
    if (!shared_.device) {
      spdlog::info("waiting for a worker that serves '{}' to learn its device", options_.device);
      if (!shared_.changed.wait_for(lock, options_.wait_for_workers, [&] {
            return shared_.device.has_value() || !shared_.fatal.empty();
          })) {
        throw Error("no worker serving '" + options_.device + "' connected within " +
                    std::to_string(options_.wait_for_workers.count() / 1000) + " s" +
                    DescribeConnected());
      }
      if (!shared_.fatal.empty()) throw Error(shared_.fatal);
    }
    return *shared_.device;
  }

  void WaitForWorkers() override {
    std::unique_lock lock(shared_.mutex);
    const auto deadline = Clock::now() + options_.wait_for_workers;
    auto last_log = Clock::now();
    while (shared_.matching < options_.min_workers && shared_.fatal.empty()) {
      if (Clock::now() >= deadline) {
        throw Error(
            "only " + std::to_string(shared_.matching) + " of " +
            std::to_string(options_.min_workers) + " workers serving '" + options_.device +
            "' connected within " + std::to_string(options_.wait_for_workers.count() / 1000) +
            " s" + DescribeConnected() + "; start workers with: ios-worker --connect " +
            (bound_.empty() ? "tcp://HOST:PORT" : bound_) + " --backend " + options_.device);
      }
      if (Clock::now() - last_log > std::chrono::seconds(5)) {
        last_log = Clock::now();
        spdlog::info("waiting for workers serving '{}': {} of {} connected", options_.device,
                     shared_.matching, options_.min_workers);
      }
      shared_.changed.wait_for(lock, milliseconds(200));
    }
    if (!shared_.fatal.empty()) throw Error(shared_.fatal);
  }

  void MeasureAll(const std::vector<const StageSpec*>& specs, int batch_size,
                  const MeasureSettings& settings,
                  const std::function<void(std::span<const IndexedResult>)>& on_results) override {
    if (specs.empty()) return;
    WaitForWorkers();
    {
      std::lock_guard lock(shared_.mutex);
      shared_.batch = detail::FarmBatch{&specs, batch_size, settings};
      shared_.arrived.clear();
      shared_.batch_closed = false;
    }
    SendControl("b");
    // If on_results throws, the router must let go of `specs` before the
    // caller's frame (which owns them) unwinds.
    struct CloseBatchOnExit {
      FarmImpl& farm;
      ~CloseBatchOnExit() { farm.CloseBatch(); }
    } close_batch{*this};
    std::vector<IndexedResult> delivered;
    size_t remaining = specs.size();
    while (remaining > 0) {
      {
        std::unique_lock lock(shared_.mutex);
        shared_.changed.wait_for(lock, milliseconds(500), [&] {
          return !shared_.arrived.empty() || !shared_.fatal.empty();
        });
        if (!shared_.fatal.empty()) throw Error(shared_.fatal);
        delivered.swap(shared_.arrived);
        shared_.arrived.clear();
      }
      if (delivered.empty()) continue;
      remaining -= std::min(remaining, delivered.size());
      on_results(delivered);
      delivered.clear();
    }
  }

  int ActiveWorkers() const override { return shared_.matching.load(); }

  std::string BoundEndpoint() const override { return bound_; }

  std::vector<WorkerReport> Workers() const override {
    std::lock_guard lock(shared_.mutex);
    std::vector<WorkerReport> reports;
    for (const auto& [key, report] : shared_.reports) reports.push_back(report);
    return reports;
  }

 private:
  // Never blocks: if the router thread has died there is nobody to tell.
  void SendControl(const char* command) {
    std::lock_guard lock(control_mutex_);
    try {
      (void)control_api_.send(zmq::buffer(std::string_view(command)), zmq::send_flags::dontwait);
    } catch (const zmq::error_t& e) {
      spdlog::debug("farm control '{}' not delivered: {}", command, e.what());
    }
  }

  // Waits until the router thread no longer refers to the current batch.
  void CloseBatch() {
    SendControl("c");
    std::unique_lock lock(shared_.mutex);
    shared_.changed.wait_for(lock, std::chrono::seconds(5),
                             [&] { return shared_.batch_closed || !shared_.fatal.empty(); });
  }

  // Caller holds shared_.mutex.
  std::string DescribeConnected() const {
    std::string text;
    for (const auto& [key, report] : shared_.reports) {
      if (!report.connected) continue;
      text += (text.empty() ? "" : ", ") + report.worker_id + " (" + report.device_name +
              (report.matches ? "" : ", other device") + ")";
    }
    return text.empty() ? "; no worker connected" : "; connected: " + text;
  }

  FarmOptions options_;
  net::Context context_;  // first in, last out: every socket below lives in it
  std::unique_ptr<net::CurveAuthenticator> authenticator_;
  zmq::socket_t router_, control_api_, control_router_;
  std::mutex control_mutex_;
  std::string bound_;
  std::thread router_thread_;
  std::vector<std::unique_ptr<worker::Worker>> local_workers_;
  std::vector<std::jthread> local_threads_;

  detail::FarmShared shared_;
};

}  // namespace

std::unique_ptr<Farm> Farm::Start(const FarmOptions& options) {
  return std::make_unique<FarmImpl>(options);
}

}  // namespace ios::coordinator
