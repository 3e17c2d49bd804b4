#include "worker/farm_worker.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <random>
#include <thread>
#include <zmq.hpp>

#include "common/error.h"
#include "net/endpoint.h"
#include "schema/protocol.h"

namespace ios::worker {

namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

std::string DefaultWorkerId() {
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0) std::snprintf(host, sizeof host, "unknown");
  return std::string(host) + ":" + std::to_string(getpid());
}

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// The DEALER's routing id for the life of this Worker: fixed across
// reconnections, so the coordinator takes answers sent on a new connection
// as this worker's; a random part, so two workers never share one. (libzmq:
// at most 255 bytes, not starting with a zero byte.)
std::string SessionRoutingId(const std::string& worker_id) {
  std::random_device entropy;
  char nonce[20];
  std::snprintf(nonce, sizeof nonce, "%08x%08x", entropy(), entropy());
  return "w" + std::string(nonce) + ":" + worker_id.substr(0, 200);
}

// A query the worker could identify but not accept: answered with an error
// rather than left to the coordinator's deadline. A stage outside the
// protocol's budgets is a fact about the stage; bytes that do not decode are
// not (they could be damaged on the way).
schema::StageResult RefusalOf(const schema::DecodeError& error) {
  schema::StageResult answer{error.query_id.value_or(0), {}};
  answer.result.error = error.kind == schema::DecodeError::Kind::kInvalid
                            ? MeasureError::kUnsupported
                            : MeasureError::kBackendFailure;
  answer.result.error_message =
      std::string("the worker refused the query (") + ToString(error.kind) + "): " + error.message;
  return answer;
}

}  // namespace

struct Worker::Impl {
  Impl(net::Context& ctx, std::unique_ptr<devices::Backend> b, WorkerOptions opts)
      : context(ctx), backend(std::move(b)), options(std::move(opts)) {
    if (options.worker_id.empty()) options.worker_id = DefaultWorkerId();
    if (options.capacity < 1) throw Error("worker capacity must be >= 1");
    if (options.heartbeat.count() < 10) throw Error("worker heartbeat must be >= 10 ms");
    if (!options.announce) announce_level = spdlog::level::debug;
    if (const std::string problem =
            net::EndpointProblem(options.endpoint, net::EndpointUse::kConnect);
        !problem.empty()) {
      throw Error("--connect '" + options.endpoint + "': " + problem);
    }
    routing_id = SessionRoutingId(options.worker_id);
    // Unique within the context: embedded farms run several workers in one.
    results_endpoint =
        "inproc://ios-worker-results-" + std::to_string(reinterpret_cast<uintptr_t>(this));
  }

  // --- The measuring thread: one stage at a time, in arrival order. ---
  void MeasureThread() noexcept {
    try {
      MeasureLoop();
    } catch (const std::exception& e) {
      // Only the results socket can fail here (the context going away):
      // nothing more can be answered, and Serve's deadlines cover the rest.
      spdlog::error("worker {}: measuring thread: {}", options.worker_id, e.what());
    } catch (...) {
      spdlog::error("worker {}: measuring thread: unknown exception", options.worker_id);
    }
  }

  void MeasureLoop() {
    zmq::socket_t results(context.zmq(), zmq::socket_type::pair);
    results.set(zmq::sockopt::linger, 0);
    results.connect(results_endpoint);
    for (;;) {
      schema::StageQuery query;
      {
        std::unique_lock lock(mutex);
        wake.wait(lock, [&] { return stopping || !queue.empty(); });
        if (stopping) return;
        query = std::move(queue.front());
        queue.pop_front();
      }
      schema::StageResult answer{query.query_id, {}};
      try {
        answer.result = backend->Measure(query.stage, query.batch_size, query.settings);
      } catch (const std::exception& e) {
        // A backend must report expected failures as results; anything it
        // throws is still an answer, not the end of the worker.
        answer.result.error = MeasureError::kBackendFailure;
        answer.result.error_message = e.what();
      }
      if (answer.result.ok()) {
        ++measured;
      } else {
        ++failed;
        spdlog::warn("query {}: {}: {} ({})", query.query_id, ToString(answer.result.error),
                     answer.result.error_message, query.stage.Describe());
      }
      const std::string bytes = schema::Encode(answer);
      results.send(zmq::buffer(bytes), zmq::send_flags::none);
      if (backend->Lost()) {
        // Nothing more can be measured in this process: the serving
        // thread forwards this answer and ends the worker (Run throws).
        {
          std::lock_guard lock(mutex);
          lost_reason = answer.result.error_message;
        }
        device_lost = true;
        return;
      }
    }
  }

  void DropQueued() {
    std::lock_guard lock(mutex);
    dropped += static_cast<int64_t>(queue.size());
    queue.clear();
  }

  void Enqueue(schema::StageQuery&& query) {
    {
      std::lock_guard lock(mutex);
      queue.push_back(std::move(query));
    }
    wake.notify_one();
  }

  void SendHello(zmq::socket_t& socket) {
    schema::Hello hello;
    hello.worker_id = options.worker_id;
    hello.device = backend->Device();
    hello.properties = {{"pid", std::to_string(getpid())}};
    // The device's figures, as its fingerprint lists them ("gpu=...|cc=8.0|
    // sms=108|...|driver=...|cudnn=..."), for the coordinator's logs.
    const std::string& fingerprint = hello.device.fingerprint;
    for (size_t begin = 0; begin < fingerprint.size();) {
      const size_t end = std::min(fingerprint.find('|', begin), fingerprint.size());
      const std::string field = fingerprint.substr(begin, end - begin);
      if (const size_t equals = field.find('='); equals != std::string::npos && equals > 0) {
        hello.properties.emplace_back(field.substr(0, equals), field.substr(equals + 1));
      }
      begin = end + 1;
    }
    hello.capacity = static_cast<uint32_t>(options.capacity);
    hello.heartbeat_ms = static_cast<uint32_t>(options.heartbeat.count());
    hello.software = std::string("ios-worker ") + IOS_FARM_VERSION;
    Send(socket, schema::Encode(hello));
  }

  // Never blocks: a message that cannot be queued now is dropped; the
  // coordinator's deadlines and heartbeats cover the loss.
  static bool Send(zmq::socket_t& socket, const std::string& bytes) {
    try {
      return socket.send(zmq::buffer(bytes), zmq::send_flags::dontwait).has_value();
    } catch (const zmq::error_t& e) {
      spdlog::debug("send failed: {}", e.what());
      return false;
    }
  }

  enum class Session { kLost, kShutdown, kStopped, kVersionMismatch, kDeviceLost };

  // One connection to the coordinator, until it is lost or ends.
  Session Serve(zmq::socket_t& results, const std::stop_token& stop) {
    zmq::socket_t dealer(context.zmq(), zmq::socket_type::dealer);
    dealer.set(zmq::sockopt::linger, 0);
    dealer.set(zmq::sockopt::maxmsgsize, static_cast<int64_t>(schema::kMaxMessageBytes));
    dealer.set(zmq::sockopt::routing_id, routing_id);
    if (options.curve_keys) {
      net::MakeCurveClient(dealer, *options.curve_keys, options.curve_server_key);
    }
    try {
      dealer.connect(options.endpoint);
    } catch (const zmq::error_t& e) {
      throw Error("cannot connect to '" + options.endpoint + "': " + e.what());
    }
    ++connects;
    SendHello(dealer);
    const milliseconds own_interval = options.heartbeat;
    milliseconds peer_interval = own_interval;
    auto last_heard = Clock::now();
    auto next_heartbeat = Clock::now() + own_interval;
    bool heard_anything = false;
    zmq::pollitem_t items[] = {{dealer.handle(), 0, ZMQ_POLLIN, 0},
                               {results.handle(), 0, ZMQ_POLLIN, 0}};
    while (!stop.stop_requested()) {
      const auto now = Clock::now();
      const auto wait = std::clamp(std::chrono::duration_cast<milliseconds>(next_heartbeat - now),
                                   milliseconds(0), milliseconds(100));
      zmq::poll(items, 2, wait);
      if (items[0].revents & ZMQ_POLLIN) {
        zmq::message_t frame;
        while (dealer.recv(frame, zmq::recv_flags::dontwait)) {
          last_heard = Clock::now();
          if (!heard_anything) {
            heard_anything = true;
            backoff = options.reconnect_min;
            spdlog::log(announce_level, "connected to coordinator at {}", options.endpoint);
          }
          if (frame.more()) {  // we only ever expect single-frame messages
            spdlog::warn("dropped a multi-part message from the coordinator");
            while (frame.more() && dealer.recv(frame, zmq::recv_flags::dontwait)) {
            }
            continue;
          }
          auto decoded = schema::Decode(frame.to_string_view());
          if (auto* error = std::get_if<schema::DecodeError>(&decoded)) {
            if (error->kind == schema::DecodeError::Kind::kVersionMismatch) {
              // Not fatal: a long-lived worker waits for an upgraded coordinator.
              spdlog::error(
                  "coordinator speaks protocol version {}, this worker {}; upgrade "
                  "one of them (retrying every {} s)",
                  error->version, schema::kProtocolVersion, options.reconnect_max.count() / 1000.0);
              return Session::kVersionMismatch;
            }
            // Logged, but not so often that a flood of garbage floods the log too.
            const bool log = ++bad_messages <= 10 || bad_messages % 1000 == 0;
            if (error->query_id) {
              // A query we can name but not accept: say so, never stay silent.
              ++failed;
              if (log) {
                spdlog::warn("refused query {} ({} so far): {}: {}", *error->query_id, bad_messages,
                             ToString(error->kind), error->message);
              }
              Send(dealer, schema::Encode(RefusalOf(*error)));
              next_heartbeat = Clock::now() + own_interval;
              continue;
            }
            if (log) {
              spdlog::warn("dropped a bad message from the coordinator ({} so far): {}: {}",
                           bad_messages, ToString(error->kind), error->message);
            }
            continue;
          }
          auto& message = std::get<schema::Message>(decoded);
          if (auto* query = std::get_if<schema::StageQuery>(&message)) {
            Enqueue(std::move(*query));
          } else if (auto* beat = std::get_if<schema::Heartbeat>(&message)) {
            peer_interval = milliseconds(beat->interval_ms);
          } else if (auto* reject = std::get_if<schema::Reject>(&message)) {
            if (reject->reason == schema::RejectReason::kVersionMismatch) {
              spdlog::error("coordinator refused this worker: {} (retrying every {} s)",
                            reject->message, options.reconnect_max.count() / 1000.0);
              return Session::kVersionMismatch;
            }
            if (reject->reason == schema::RejectReason::kUnknownWorker) {
              // A coordinator that gave us up as lost, or a restarted one.
              // What we hold is kept: the first still takes the answers, the
              // second ignores them (its query ids are its own).
              spdlog::info("coordinator does not know this worker (restarted?); saying hello");
              SendHello(dealer);
            } else {
              spdlog::warn("coordinator refused a message: {}", reject->message);
            }
          } else if (auto* shutdown = std::get_if<schema::Shutdown>(&message)) {
            if (stop.stop_requested()) return Session::kStopped;
            spdlog::info("coordinator is shutting down ({}); waiting for the next one",
                         shutdown->reason);
            DropQueued();
            return Session::kShutdown;
          } else {
            spdlog::warn("dropped an unexpected message from the coordinator");
          }
        }
      }
      const bool lost_device = device_lost;  // read before the results: its answer is among them
      if (lost_device || (items[1].revents & ZMQ_POLLIN)) {
        zmq::message_t frame;
        while (results.recv(frame, zmq::recv_flags::dontwait)) {
          if (!Send(dealer, frame.to_string())) spdlog::warn("could not send a result; dropped");
          next_heartbeat = Clock::now() + own_interval;  // the result was our sign of life
        }
      }
      if (lost_device) {
        dealer.set(zmq::sockopt::linger, 2000);  // let the last answer leave
        return Session::kDeviceLost;
      }
      const auto after = Clock::now();
      const auto silence_limit = options.liveness * std::max(own_interval, peer_interval);
      if (after - last_heard > silence_limit) {
        if (heard_anything) {
          // Queued queries are kept: a coordinator behind a network blip
          // still wants them, and accepts them on the next connection.
          spdlog::warn("coordinator silent for {:.1f} s; reconnecting",
                       Seconds(after - last_heard));
        } else {
          spdlog::log(announce_level, "no answer from coordinator at {} yet{}; trying again",
                      options.endpoint,
                      options.curve_keys ? " (with CURVE: is --curve-server-key its .pub?)" : "");
        }
        return Session::kLost;
      }
      if (after >= next_heartbeat) {
        Send(dealer,
             schema::Encode(schema::Heartbeat{static_cast<uint32_t>(own_interval.count())}));
        next_heartbeat = after + own_interval;
      }
    }
    return Session::kStopped;
  }

  void Run(std::stop_token stop) {
    zmq::socket_t results(context.zmq(), zmq::socket_type::pair);
    results.set(zmq::sockopt::linger, 0);
    results.bind(results_endpoint);
    // The measuring thread's stop path is `stopping` (it waits on `wake`).
    struct StopOnExit {
      Impl& impl;
      ~StopOnExit() {
        {
          std::lock_guard lock(impl.mutex);
          impl.stopping = true;
        }
        impl.wake.notify_all();
      }
    };
    std::jthread measurer;  // declared before the stopper: joined after it has stopped
    StopOnExit stop_on_exit{*this};
    measurer = std::jthread([this] { MeasureThread(); });
    const DeviceInfo& device = backend->Device();
    spdlog::log(announce_level,
                "worker {}: device {}{}, fingerprint {}, capacity {}, coordinator {}",
                options.worker_id, device.name, device.simulated ? " (simulated)" : "",
                device.fingerprint, options.capacity, options.endpoint);
    backoff = options.reconnect_min;
    while (!stop.stop_requested()) {
      switch (Serve(results, stop)) {
        case Session::kStopped:
          return;
        case Session::kDeviceLost: {
          std::lock_guard lock(mutex);
          throw Error("the device was lost (" + lost_reason +
                      "); exiting so that a fresh worker process can take over");
        }
        case Session::kVersionMismatch:
          backoff = options.reconnect_max;
          break;
        case Session::kShutdown:
          backoff = options.reconnect_min;
          break;
        case Session::kLost:
          break;
      }
      spdlog::log(announce_level, "reconnecting in {} ms", backoff.count());
      const auto until = Clock::now() + backoff;
      while (!stop.stop_requested() && Clock::now() < until) {
        std::this_thread::sleep_for(
            std::min<Clock::duration>(milliseconds(50), until - Clock::now()));
      }
      backoff = std::min(backoff * 2, options.reconnect_max);
    }
  }

  net::Context& context;
  std::unique_ptr<devices::Backend> backend;
  WorkerOptions options;
  std::string routing_id;  // of every connection this worker makes
  std::string results_endpoint;
  milliseconds backoff{0};
  spdlog::level::level_enum announce_level = spdlog::level::info;
  int64_t bad_messages = 0;

  std::mutex mutex;  // guards queue and stopping
  std::condition_variable wake;
  std::deque<schema::StageQuery> queue;
  bool stopping = false;
  std::string lost_reason;  // guarded by mutex

  std::atomic<bool> device_lost{false};

  std::atomic<int64_t> measured{0}, failed{0}, connects{0}, dropped{0};
};

Worker::Worker(net::Context& context, std::unique_ptr<devices::Backend> backend,
               WorkerOptions options)
    : impl_(std::make_unique<Impl>(context, std::move(backend), std::move(options))) {}

Worker::~Worker() = default;

void Worker::Run(std::stop_token stop) { impl_->Run(std::move(stop)); }

WorkerCounters Worker::counters() const {
  return {impl_->measured.load(), impl_->failed.load(), impl_->connects.load(),
          impl_->dropped.load()};
}

const DeviceInfo& Worker::Device() const { return impl_->backend->Device(); }

}  // namespace ios::worker
