// The farm's public face: set-up (sockets, CURVE, embedded workers) and the
// caller-side Measurer methods. The router thread is in farm_router.cc.
#include "coordinator/farm.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <filesystem>
#include <random>
#include <thread>
#include <zmq.hpp>

#include "common/error.h"
#include "coordinator/farm_router.h"
#include "net/context.h"
#include "net/curve.h"
#include "net/endpoint.h"
#include "net/handshake_monitor.h"
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
// Queries the caller encodes and checks before handing them to the router:
// small enough that the first ones go out at once, large enough that the
// hand-over costs nothing per query.
constexpr size_t kPostChunk = 256;
// A batch whose results stop coming for this long hands its caller an empty
// delivery (Measurer::MeasureStream), so that what the caller holds back
// (the search commits a few times a second) never waits much longer.
constexpr auto kQuietDelivery = milliseconds(500);
// Stages refused before sending that are logged one by one per batch; the
// rest are counted in one line.
constexpr int kRefusalsLogged = 10;

// Whether the coordinator's encoding of a query is one a worker accepts: the
// worker's own decoder and checks, run on the bytes it would receive. Empty
// when it is; otherwise why not (names the field and the limit).
std::string QueryProblem(const std::string& bytes) {
  auto decoded = schema::Decode(bytes);
  if (auto* error = std::get_if<schema::DecodeError>(&decoded)) return error->message;
  return {};
}

// "tcp://0.0.0.0:5555" is where we listen, not where a worker on another
// host connects.
std::string ConnectableEndpoint(const std::string& bound) {
  for (const std::string any : {"tcp://0.0.0.0:", "tcp://[::]:"}) {
    if (bound.starts_with(any)) return "tcp://HOST:" + bound.substr(any.size());
  }
  return bound.empty() ? "tcp://HOST:PORT" : bound;
}

class FarmImpl final : public Farm {
 public:
  explicit FarmImpl(const FarmOptions& options) : options_(options) {
    if (options_.min_workers < 0) throw Error("--min-workers must be >= 0");
    if (options_.local_workers < 0) throw Error("--local-workers must be >= 0");
    if (options_.max_attempts < 1) throw Error("max attempts must be >= 1");
    if (options_.bind.empty() && options_.local_workers == 0) {
      throw Error("no workers: give --bind ENDPOINT for remote workers or --local-workers N");
    }
    if (!options_.bind.empty()) {
      if (const std::string problem = net::EndpointProblem(options_.bind, net::EndpointUse::kBind);
          !problem.empty()) {
        throw Error("--bind '" + options_.bind + "': " + problem);
      }
    }
    // The backends first: nothing is started yet when one cannot be made.
    const devices::Registry& registry =
        options_.registry != nullptr ? *options_.registry : devices::BuiltinRegistry();
    std::vector<std::unique_ptr<devices::Backend>> backends;
    for (int i = 0; i < options_.local_workers; ++i) {
      backends.push_back(
          registry.OpenBackend(options_.local_backend, options_.local_backend_options));
    }
    if (options_.device.starts_with("sim:")) {
      // The coordinator can name a simulated device itself, so a search
      // whose stages are all in the DB needs no worker at all.
      shared_.device = registry.OpenBackend(options_.device)->Device();
    } else if (!backends.empty()) {
      // Embedded workers measure on this machine: their device is known now.
      shared_.device = backends.front()->Device();
    }
    std::random_device entropy;
    // Query ids start at a random point so that a result meant for an
    // earlier coordinator can never be taken for one of ours.
    next_query_id_ = (static_cast<uint64_t>(entropy()) << 32) | entropy();
    router_ = zmq::socket_t(context_.zmq(), zmq::socket_type::router);
    router_.set(zmq::sockopt::router_mandatory, 1);
    // A worker session keeps its routing id across reconnections; the new
    // connection takes over from a half-dead old one instead of being refused.
    router_.set(zmq::sockopt::router_handover, 1);
    router_.set(zmq::sockopt::linger, 0);
    router_.set(zmq::sockopt::maxmsgsize, static_cast<int64_t>(schema::kMaxMessageBytes));
    if (curve()) {
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
      monitor_ = std::make_unique<net::HandshakeMonitor>(context_, router_, curve());
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
    for (int i = 0; i < options_.local_workers; ++i) {
      worker::WorkerOptions worker_options;
      worker_options.endpoint = inproc;
      worker_options.worker_id = "local-" + std::to_string(i + 1);
      worker_options.heartbeat = options_.heartbeat;
      worker_options.liveness = options_.liveness;
      worker_options.announce = false;
      worker_options.capacity = kLocalWorkerCapacity;
      local_workers_.push_back(std::make_unique<worker::Worker>(
          context_, std::move(backends[static_cast<size_t>(i)]), worker_options));
    }
    // Threads last. Each is owned by a jthread member, so an exception from
    // here on stops and joins what has started (members go in reverse order:
    // the threads before everything they use).
    router_thread_ = std::jthread([this](std::stop_token stop) {
      detail::RunFarmRouter(options_, shared_, router_, control_router_, monitor_.get(), stop);
    });
    for (auto& local : local_workers_) {
      worker::Worker& w = *local;
      local_threads_.emplace_back([this, &w](std::stop_token stop) { RunLocalWorker(w, stop); });
    }
  }

  ~FarmImpl() override {
    // Embedded workers first, so they end quietly instead of going back to
    // waiting for a next coordinator when the router says goodbye.
    for (auto& thread : local_threads_) thread.request_stop();
    router_thread_.request_stop();
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
    // --min-workers holds the first batch back; once measuring has begun, a
    // later batch (the search's verification) goes on with whoever is left.
    const int wanted =
        workers_were_ready_ ? std::min(options_.min_workers, 1) : options_.min_workers;
    while (shared_.matching < wanted && shared_.fatal.empty()) {
      if (Clock::now() >= deadline) {
        throw Error("only " + std::to_string(shared_.matching) + " of " + std::to_string(wanted) +
                    " workers serving '" + options_.device + "' connected within " +
                    std::to_string(options_.wait_for_workers.count() / 1000) + " s" +
                    DescribeConnected() + "; start workers with: " + WorkerCommand());
      }
      if (Clock::now() - last_log > std::chrono::seconds(5)) {
        last_log = Clock::now();
        spdlog::info("waiting for workers serving '{}': {} of {} connected", options_.device,
                     shared_.matching, wanted);
      }
      shared_.changed.wait_for(lock, milliseconds(200));
    }
    if (!shared_.fatal.empty()) throw Error(shared_.fatal);
    workers_were_ready_ = true;
  }

  void MeasureStream(
      std::vector<const StageSpec*> specs, int batch_size, const MeasureSettings& settings,
      const std::function<MoreSpecs(std::span<const IndexedResult>)>& on_results) override {
    const uint32_t timeout_ms = TimeoutMs();
    RunBatch(
        specs.size(),
        [&](uint64_t id, size_t i) {
          return schema::EncodeQuery(id, *specs[i], batch_size, settings, timeout_ms);
        },
        [&](size_t i) { return "stage " + specs[i]->Describe(); },
        [&](std::span<const IndexedResult> results) {
          const MoreSpecs more = on_results(results);
          specs.insert(specs.end(), more.begin(), more.end());
          return more.size();
        });
  }

  std::vector<MeasureResult> MeasureNetworks(std::span<const NetworkSpec* const> networks,
                                             int batch_size,
                                             const MeasureSettings& settings) override {
    std::vector<MeasureResult> results(networks.size());
    const uint32_t timeout_ms = TimeoutMs();
    RunBatch(
        networks.size(),
        [&](uint64_t id, size_t i) {
          return schema::EncodeNetworkQuery(id, *networks[i], batch_size, settings, timeout_ms);
        },
        [&](size_t i) { return networks[i]->Describe(); },
        [&](std::span<const IndexedResult> arrived) {
          for (const IndexedResult& r : arrived) results.at(r.index) = r.result;
          return size_t{0};
        },
        /*networks=*/true);
    return results;
  }

  LinkMeasurement MeasureLink(const LinkQuery& query) override {
    WaitForWorkers();
    if (shared_.multi_device.load() == 0) {
      std::lock_guard lock(shared_.mutex);
      return LinkMeasurement::Unsupported("no worker serving '" + options_.device +
                                          "' owns two such devices" + DescribeConnected() +
                                          "; start one with: " + WorkerCommand() + " --devices 2");
    }
    LinkMeasurement answer = LinkMeasurement::Unsupported("the link query got no answer");
    const uint32_t timeout_ms = TimeoutMs();
    RunBatch(
        1, [&](uint64_t id, size_t) { return schema::EncodeLinkQuery(id, query, timeout_ms); },
        [](size_t) { return std::string("link query"); },
        [&](std::span<const IndexedResult> arrived) {
          for (const IndexedResult& r : arrived) {
            if (r.result.ok() && r.link) {
              answer = *r.link;
              continue;
            }
            answer = LinkMeasurement{};
            answer.error = r.result.ok() ? MeasureError::kBackendFailure : r.result.error;
            answer.error_message = r.result.ok() ? "a worker answered a link query with no link"
                                                 : r.result.error_message;
          }
          return size_t{0};
        },
        /*networks=*/false, /*min_devices=*/2);
    return answer;
  }

  int ActiveWorkers() const override { return shared_.matching.load(); }
  int Credit() const override { return shared_.credit.load(); }

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

  // Query i of a batch, encoded with its id, and its description for logs.
  using Encoder = std::function<std::string(uint64_t id, size_t i)>;
  using Describer = std::function<std::string(size_t i)>;
  // Takes a batch's results as they arrive; returns how many queries it
  // added to the batch (the encoder must know them by then).
  using Deliver = std::function<size_t(std::span<const IndexedResult>)>;

  // Sends `count` queries (and whatever `deliver` adds) and hands every
  // result to `deliver` on this thread, until each query has one.
  // Only workers owning `min_devices` devices take them (a link query: 2).
  void RunBatch(size_t count, const Encoder& encode, const Describer& describe,
                const Deliver& deliver, bool networks = false, uint32_t min_devices = 1) {
    if (count == 0) return;
    WaitForWorkers();
    // Query ids stay unique across batches (a late answer to an earlier
    // batch must not pass for one of this batch): the batch takes the next
    // ids, and more as it grows.
    const uint64_t first_id = next_query_id_;
    next_query_id_ += count;
    {
      std::lock_guard lock(shared_.mutex);
      shared_.batch = {++generation_, true, first_id, count, min_devices};
      shared_.posted.clear();
      shared_.arrived.clear();
    }
    // However this call ends, the router stops sending the batch's queries.
    // It reads nothing of the caller's specs (it owns the bytes it sends),
    // so nothing has to wait for it.
    struct CloseBatchOnExit {
      FarmImpl& farm;
      ~CloseBatchOnExit() { farm.CloseBatch(); }
    } close_batch{*this};
    std::vector<IndexedResult> delivered;
    auto last_delivery = Clock::now();
    size_t next = 0, answered = 0;
    int refused = 0;
    while (answered < count) {
      if (next < count) {
        next = Post(count, next, first_id, encode, describe, networks, delivered, refused);
      }
      {
        std::unique_lock lock(shared_.mutex);
        if (delivered.empty() && next == count) {
          shared_.changed.wait_for(lock, milliseconds(500), [&] {
            return !shared_.arrived.empty() || !shared_.fatal.empty();
          });
        }
        if (!shared_.fatal.empty()) throw Error(shared_.fatal);
        for (IndexedResult& r : shared_.arrived) delivered.push_back(std::move(r));
        shared_.arrived.clear();
      }
      if (delivered.empty() && (next < count || Clock::now() - last_delivery < kQuietDelivery)) {
        continue;
      }
      answered += delivered.size();
      last_delivery = Clock::now();
      const size_t more = deliver(delivered);
      delivered.clear();
      if (more > 0) {
        count += more;
        next_query_id_ += more;
        // The router learns the new size before it sees their queries
        // (Post announces them after this).
        std::lock_guard lock(shared_.mutex);
        shared_.batch.size = count;
      }
    }
    if (refused > kRefusalsLogged) {
      spdlog::warn("{} queries in all were beyond what a worker accepts (stored as unsupported)",
                   refused);
    }
  }

  // Encodes and checks queries [next, count) (one chunk) and posts them to
  // the router. A query no worker would accept is answered here, as
  // unsupported: sent, every worker would refuse it. Returns the next
  // offset to post.
  size_t Post(size_t count, size_t next, uint64_t first_id, const Encoder& encode,
              const Describer& describe, bool networks, std::vector<IndexedResult>& answered,
              int& refused) {
    std::vector<detail::PostedQuery> chunk;
    const size_t end = std::min(count, next + kPostChunk);
    for (; next < end; ++next) {
      std::string bytes = encode(first_id + next, next);
      if (std::string problem = QueryProblem(bytes); !problem.empty()) {
        if (++refused <= kRefusalsLogged) {
          spdlog::warn("{} is beyond what a worker accepts; stored as unsupported: {}",
                       describe(next), problem);
        }
        MeasureResult result;
        result.error = MeasureError::kUnsupported;
        result.error_message =
            "beyond the wire protocol's limits, no worker measures it: " + problem;
        answered.push_back({next, std::move(result)});
        continue;
      }
      chunk.push_back({static_cast<uint32_t>(next), std::move(bytes), networks});
    }
    if (!chunk.empty()) {
      {
        std::lock_guard lock(shared_.mutex);
        for (auto& query : chunk) shared_.posted.push_back(std::move(query));
      }
      SendControl("u");
    }
    return next;
  }

  // What each query says of its deadline: the worker bounds its measurement
  // by it (worker::MeasurementBound).
  uint32_t TimeoutMs() const {
    return static_cast<uint32_t>(
        std::clamp<int64_t>(options_.query_timeout.count(), 1, UINT32_MAX));
  }

  // Tells the router the batch is over. Never waits: the router owns all it
  // still holds of the batch and drops it when it reads the update.
  void CloseBatch() {
    {
      std::lock_guard lock(shared_.mutex);
      shared_.batch.open = false;
      shared_.posted.clear();
      shared_.arrived.clear();
    }
    SendControl("u");
  }

  // An embedded worker's thread: whatever happens ends here, reported.
  void RunLocalWorker(worker::Worker& w, const std::stop_token& stop) noexcept {
    try {
      w.Run(stop);
    } catch (const std::exception& e) {
      ReportLocalWorkerFailure(e.what());
    } catch (...) {
      ReportLocalWorkerFailure("unknown exception");
    }
  }

  void ReportLocalWorkerFailure(const std::string& what) noexcept {
    try {
      spdlog::error("embedded worker: {}", what);
      std::lock_guard lock(shared_.mutex);
      if (shared_.fatal.empty()) shared_.fatal = "an embedded worker failed: " + what;
      shared_.changed.notify_all();
    } catch (...) {
    }
  }

  bool curve() const {
    return !options_.curve_secret_key_file.empty() || !options_.curve_allow_dir.empty();
  }

  // The command line that starts a worker for this farm, CURVE flags included.
  std::string WorkerCommand() const {
    std::string command = "ios-worker --connect " + ConnectableEndpoint(bound_) + " --backend " +
                          (options_.device.empty() ? "DEVICE" : options_.device);
    if (curve()) {
      // The coordinator's .pub sits beside its .key when ios-keygen made them.
      std::filesystem::path pub = options_.curve_secret_key_file;
      pub.replace_extension(".pub");
      std::error_code error;
      command += " --curve-server-key " +
                 (std::filesystem::exists(pub, error) ? pub.string() : "COORDINATOR.pub") +
                 " --curve-key WORKER.key (with WORKER.pub copied into " +
                 options_.curve_allow_dir + ")";
    }
    return command;
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
  detail::FarmShared shared_;  // before the threads: they use it to the end
  net::Context context_;       // before every socket: they all live in it
  std::unique_ptr<net::CurveAuthenticator> authenticator_;
  zmq::socket_t router_, control_api_, control_router_;
  std::unique_ptr<net::HandshakeMonitor> monitor_;  // used by the router thread
  std::mutex control_mutex_;
  std::string bound_;
  uint64_t next_query_id_ = 0, generation_ = 0;  // the caller's thread only
  bool workers_were_ready_ = false;              // WaitForWorkers succeeded once
  std::vector<std::unique_ptr<worker::Worker>> local_workers_;
  // Last: destroyed first, joining before anything they use goes.
  std::jthread router_thread_;
  std::vector<std::jthread> local_threads_;
};

}  // namespace

namespace detail {

// Backend options after a comma ("cpu,threads=2") configure the embedded
// workers; a remote worker's own --backend decides its options, and once the
// device is known (from the embedded workers or the first worker) only equal
// fingerprints serve.
bool Serves(const std::string& selector, const DeviceInfo& device) {
  std::string kind = selector.substr(0, selector.find(','));
  // "cuda:1": the ordinal picks a GPU on its host, not a kind of device;
  // identical GPUs share a fingerprint. ("sim:v100" names a model: kept.)
  if (const size_t colon = kind.find(':');
      colon != std::string::npos && colon + 1 < kind.size() &&
      std::all_of(kind.begin() + static_cast<std::ptrdiff_t>(colon) + 1, kind.end(),
                  [](char c) { return c >= '0' && c <= '9'; })) {
    kind.resize(colon);
  }
  return selector == device.name || kind == device.backend || selector == device.fingerprint;
}

}  // namespace detail

std::unique_ptr<Farm> Farm::Start(const FarmOptions& options) {
  return std::make_unique<FarmImpl>(options);
}

}  // namespace ios::coordinator
