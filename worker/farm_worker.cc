#include "worker/farm_worker.h"

#include <spdlog/spdlog.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <random>
#include <thread>
#include <zmq.hpp>

#include "common/error.h"
#include "net/endpoint.h"
#include "schema/protocol.h"
#include "worker/measuring_thread.h"

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

using measuring::HungText;
using measuring::MeasureThread;
using measuring::MeasuringState;
using measuring::SecondsText;

}  // namespace

milliseconds MeasurementBound(uint32_t query_timeout_ms, milliseconds cap) {
  const milliseconds timeout =
      query_timeout_ms > 0 ? milliseconds(query_timeout_ms) : kDefaultQueryTimeout;
  milliseconds bound = timeout - std::min<milliseconds>(timeout / 4, std::chrono::seconds(10));
  // A short --query-timeout-s only sends a slow stage elsewhere sooner; it
  // must not make a healthy worker take itself for hung and exit.
  bound = std::max(bound, kMinMeasurementBound);
  if (cap.count() > 0) bound = std::min(bound, cap);
  return std::max(bound, milliseconds(1));
}

struct Worker::Impl {
  Impl(net::Context& ctx, std::unique_ptr<devices::Backend> backend, WorkerOptions opts)
      : context(ctx), options(std::move(opts)) {
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
    state = std::make_shared<MeasuringState>(std::move(backend), options.worker_id,
                                             options.max_measurement);
  }

  void DropQueued() {
    std::lock_guard lock(state->mutex);
    dropped += static_cast<int64_t>(state->queue.size());
    state->queue.clear();
  }

  void Enqueue(schema::StageQuery&& query) {
    {
      std::lock_guard lock(state->mutex);
      state->queue.push_back(std::move(query));
    }
    state->wake.notify_one();
  }

  // The watchdog: if the measurement under way has outlived its bound, gives
  // it up (the measuring thread will touch nothing when it returns) and
  // returns what is left to send, the answers queued before it and a
  // timeout error for it, last. Empty while all is well.
  std::vector<schema::StageResult> GiveUpIfHung() {
    std::vector<schema::StageResult> unsent;
    size_t queued = 0;
    milliseconds bound{0};
    uint64_t query_id = 0;
    {
      std::lock_guard lock(state->mutex);
      if (state->abandoned || state->finished || !state->current ||
          Clock::now() < state->current_deadline) {
        return unsent;
      }
      state->abandoned = true;
      for (schema::StageResult& answer : state->answers) unsent.push_back(std::move(answer));
      state->answers.clear();
      query_id = state->current->query_id;
      bound = state->current_bound;
      queued = state->queue.size();
      hung_message = HungText(*state, "the worker gives it up and takes no more work");
    }
    ++state->failed;
    spdlog::error(
        "worker {}: {}; {} queued queries are left to the coordinator (the device may be "
        "hung: this process should be restarted)",
        options.worker_id, hung_message, queued);
    schema::StageResult timeout{query_id, {}};
    timeout.result.error = MeasureError::kTimeout;
    timeout.result.error_message = "the measurement did not end within " + SecondsText(bound) +
                                   "; worker " + options.worker_id +
                                   " gave it up and exits (a hung device?)";
    unsent.push_back(std::move(timeout));
    return unsent;
  }

  void SendHello(zmq::socket_t& socket) {
    schema::Hello hello;
    hello.worker_id = options.worker_id;
    hello.device = state->backend->Device();
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
    // Both may be read while the measuring thread works (Backend::Links).
    hello.devices = static_cast<uint32_t>(std::max(1, state->backend->Devices()));
    hello.links = state->backend->Links();
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

  enum class Session { kLost, kShutdown, kStopped, kVersionMismatch, kDeviceLost, kHung };
  template <typename Answers>
  static void SendAnswers(zmq::socket_t& dealer, const Answers& answers) {
    for (const schema::StageResult& answer : answers) {
      if (!Send(dealer, schema::Encode(answer))) spdlog::warn("could not send a result; dropped");
    }
  }

  // One connection to the coordinator, until it is lost or ends.
  Session Serve(const std::stop_token& stop) {
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
                               {nullptr, state->doorbell.fd(), ZMQ_POLLIN, 0}};
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
              ++state->failed;
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
      bool lost_device = false;
      if (items[1].revents & ZMQ_POLLIN) {
        state->doorbell.Quiet();
        std::deque<schema::StageResult> answers;
        {
          std::lock_guard lock(state->mutex);
          answers.swap(state->answers);
          lost_device = state->device_lost;  // its answer is among these
        }
        SendAnswers(dealer, answers);
        if (!answers.empty()) next_heartbeat = Clock::now() + own_interval;  // a sign of life
      }
      if (std::vector<schema::StageResult> last = GiveUpIfHung(); !last.empty()) {
        SendAnswers(dealer, last);
        dealer.set(zmq::sockopt::linger, 2000);  // let the timeout answer leave
        return Session::kHung;
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

  // Stops the measuring thread: joined once its measurement ends, or
  // detached when that measurement outlives its bound. True when detached.
  bool EndMeasuring(std::jthread& measurer) noexcept {
    bool abandoned = false;
    {
      std::unique_lock lock(state->mutex);
      state->stopping = true;
      state->wake.notify_all();
      while (!state->finished && !state->abandoned) {
        if (!state->current) {
          // Between measurements: it sees `stopping` at once.
          state->ended.wait(lock);
          continue;
        }
        const auto deadline = state->current_deadline;
        state->ended.wait_until(lock, deadline);
        if (state->finished || !state->current || Clock::now() < state->current_deadline) {
          continue;
        }
        state->abandoned = true;
        try {
          hung_message = HungText(*state, "the worker was stopping");
        } catch (...) {
          // Out of memory while saying why: the thread is given up anyway.
        }
      }
      abandoned = state->abandoned;
    }
    if (abandoned) {
      try {
        spdlog::error("worker {}: {}", options.worker_id, hung_message);
      } catch (...) {
        // The log is best effort here; the caller reports the loss.
      }
      measurer.detach();
      return true;
    }
    measurer.join();
    return false;
  }

  WorkerLost Hung() const {
    return WorkerLost(WorkerLost::Cause::kMeasurementHung,
                      "a measurement hung (" + hung_message +
                          "); exiting so that a fresh worker process can take over");
  }

  void Run(std::stop_token stop) {
    // The thread gets its own reference: if abandoned, it outlives this.
    std::jthread measurer([shared = state] { MeasureThread(shared); });
    // However Run ends, the thread is joined, or detached when hung.
    struct EndOnExit {
      Impl& impl;
      std::jthread& thread;
      ~EndOnExit() {
        if (thread.joinable()) impl.EndMeasuring(thread);
      }
    } end_on_exit{*this, measurer};
    const DeviceInfo& device = state->backend->Device();
    spdlog::log(announce_level,
                "worker {}: device {}{}, fingerprint {}, capacity {}, coordinator {}",
                options.worker_id, device.name, device.simulated ? " (simulated)" : "",
                device.fingerprint, options.capacity, options.endpoint);
    backoff = options.reconnect_min;
    while (!stop.stop_requested()) {
      switch (Serve(stop)) {
        case Session::kStopped:
          if (EndMeasuring(measurer)) throw Hung();
          return;
        case Session::kHung:
          measurer.detach();
          throw Hung();
        case Session::kDeviceLost: {
          std::lock_guard lock(state->mutex);
          throw WorkerLost(WorkerLost::Cause::kDeviceLost,
                           "the device was lost (" + state->lost_reason +
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
        // With no coordinator to answer, a hung measurement still ends the worker.
        if (!GiveUpIfHung().empty()) {
          measurer.detach();
          throw Hung();
        }
        std::this_thread::sleep_for(
            std::min<Clock::duration>(milliseconds(50), until - Clock::now()));
      }
      backoff = std::min(backoff * 2, options.reconnect_max);
    }
    if (EndMeasuring(measurer)) throw Hung();
  }

  net::Context& context;
  WorkerOptions options;
  std::shared_ptr<MeasuringState> state;  // shared with the measuring thread
  std::string routing_id;                 // of every connection this worker makes
  milliseconds backoff{0};
  spdlog::level::level_enum announce_level = spdlog::level::info;
  int64_t bad_messages = 0;
  std::string hung_message;  // the serving thread's only: what was given up

  std::atomic<int64_t> connects{0}, dropped{0};
};

Worker::Worker(net::Context& context, std::unique_ptr<devices::Backend> backend,
               WorkerOptions options)
    : impl_(std::make_unique<Impl>(context, std::move(backend), std::move(options))) {}

Worker::~Worker() = default;

void Worker::Run(std::stop_token stop) { impl_->Run(std::move(stop)); }

WorkerCounters Worker::counters() const {
  return {impl_->state->measured.load(), impl_->state->failed.load(), impl_->connects.load(),
          impl_->dropped.load()};
}

const DeviceInfo& Worker::Device() const { return impl_->state->backend->Device(); }

}  // namespace ios::worker
