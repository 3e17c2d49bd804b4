#include "coordinator/farm_router.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <deque>
#include <random>
#include <unordered_set>
#include <zmq.hpp>

#include "schema/protocol.h"

namespace ios::coordinator::detail {

namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

bool Serves(const std::string& selector, const DeviceInfo& device) {
  return selector == device.name || selector == device.backend || selector == device.fingerprint;
}

// What the router thread knows of one connected worker.
struct WorkerState {
  std::string routing_id;
  DeviceInfo device;
  uint32_t capacity = 1;
  milliseconds heartbeat{1000};
  bool matches = false;
  Clock::time_point last_seen, next_heartbeat;
  //! Query ids sent to it and not answered by it: its used credit. A query
  //! re-sent elsewhere after a deadline stays here until this worker
  //! answers or is lost, so a stuck worker gets no more work.
  std::unordered_set<uint64_t> outstanding;
  WorkerReport* report = nullptr;  // in FarmShared::reports (stable: std::map)
};

// One query of the current batch.
struct QueryState {
  int attempts = 0;
  bool done = false;
  std::string holder;  // routing id of the worker measuring it now; empty: pending
  Clock::time_point deadline;
};

class FarmRouter {
 public:
  FarmRouter(const FarmOptions& options, FarmShared& shared, zmq::socket_t& router,
             zmq::socket_t& control)
      : options_(options), shared_(shared), router_(router), control_(control) {
    std::random_device entropy;
    // Query ids start at a random point so that a result meant for an
    // earlier coordinator can never be taken for one of ours.
    next_query_id_ = (static_cast<uint64_t>(entropy()) << 32) | entropy();
  }

  void Run() {
    try {
      RouterLoop();
    } catch (const std::exception& e) {
      spdlog::error("farm: {}", e.what());
      std::lock_guard lock(shared_.mutex);
      shared_.fatal = std::string("the farm's message loop failed: ") + e.what();
      shared_.changed.notify_all();
    }
    // Tell the workers, so they go back to waiting for the next coordinator
    // at once instead of after their liveness window.
    for (auto& [id, w] : workers_)
      SendTo(w, schema::Encode(schema::Shutdown{"coordinator exiting"}));
    router_.close();
    control_.close();
  }

 private:
  void RouterLoop() {
    zmq::pollitem_t items[] = {{router_.handle(), 0, ZMQ_POLLIN, 0},
                               {control_.handle(), 0, ZMQ_POLLIN, 0}};
    const milliseconds tick =
        std::clamp(options_.heartbeat / 4, milliseconds(5), milliseconds(100));
    auto next_tick = Clock::now();
    for (;;) {
      const auto wait = std::max(
          milliseconds(0), std::chrono::duration_cast<milliseconds>(next_tick - Clock::now()));
      zmq::poll(items, 2, wait);
      if (items[1].revents & ZMQ_POLLIN) {
        zmq::message_t command;
        while (control_.recv(command, zmq::recv_flags::dontwait)) {
          if (command.to_string_view() == "s") return;
          if (command.to_string_view() == "b") StartBatch();
          if (command.to_string_view() == "c") {
            specs_ = nullptr;
            pending_.clear();
            std::lock_guard lock(shared_.mutex);
            shared_.batch_closed = true;
            shared_.changed.notify_all();
          }
        }
      }
      if (items[0].revents & ZMQ_POLLIN) ReceiveAll();
      const auto now = Clock::now();
      if (now >= next_tick) {
        next_tick = now + tick;
        Housekeeping(now);
      }
      Dispatch();
    }
  }

  void StartBatch() {
    {
      std::lock_guard lock(shared_.mutex);
      specs_ = shared_.batch.specs;
      batch_size_ = shared_.batch.batch_size;
      settings_ = shared_.batch.settings;
    }
    first_id_ = next_query_id_;
    next_query_id_ += specs_->size();
    queries_.assign(specs_->size(), QueryState{});
    pending_.clear();
    for (uint32_t i = 0; i < specs_->size(); ++i) pending_.push_back(i);
    done_ = 0;
  }

  void ReceiveAll() {
    zmq::message_t identity;
    while (router_.recv(identity, zmq::recv_flags::dontwait)) {
      // The ROUTER prefixes the sender's identity; the rest of a message
      // arrives with it, atomically.
      std::vector<zmq::message_t> frames;
      for (bool more = identity.more(); more;) {
        zmq::message_t frame;
        if (!router_.recv(frame, zmq::recv_flags::none)) break;
        more = frame.more();
        frames.push_back(std::move(frame));
      }
      const std::string routing_id = identity.to_string();
      if (frames.size() != 1) {
        Refuse(routing_id, schema::RejectReason::kMalformed, "expected one frame per message");
        continue;
      }
      HandleMessage(routing_id, frames[0]);
    }
  }

  void HandleMessage(const std::string& routing_id, zmq::message_t& payload) {
    auto found = workers_.find(routing_id);
    WorkerState* w = found == workers_.end() ? nullptr : &found->second;
    if (w != nullptr) w->last_seen = Clock::now();
    auto decoded = schema::Decode(payload.to_string_view());
    if (auto* error = std::get_if<schema::DecodeError>(&decoded)) {
      if (error->kind == schema::DecodeError::Kind::kVersionMismatch) {
        spdlog::warn("refused a peer speaking protocol version {} (this coordinator: {})",
                     error->version, schema::kProtocolVersion);
        Refuse(routing_id, schema::RejectReason::kVersionMismatch,
               "coordinator speaks protocol version " + std::to_string(schema::kProtocolVersion) +
                   ", worker " + std::to_string(error->version));
        return;
      }
      if (++malformed_ <= 20) {
        spdlog::warn("dropped a bad message from {}: {}: {}",
                     w ? w->report->worker_id : "an unknown peer", ToString(error->kind),
                     error->message);
      }
      Refuse(routing_id, schema::RejectReason::kMalformed, error->message);
      return;
    }
    auto& message = std::get<schema::Message>(decoded);
    if (auto* hello = std::get_if<schema::Hello>(&message)) {
      Welcome(routing_id, *hello, payload);
      return;
    }
    if (w == nullptr) {
      Refuse(routing_id, schema::RejectReason::kUnknownWorker, "say hello first");
      return;
    }
    if (auto* result = std::get_if<schema::StageResult>(&message)) {
      Complete(*w, *result);
    } else if (auto* beat = std::get_if<schema::Heartbeat>(&message)) {
      w->heartbeat = milliseconds(beat->interval_ms);
    } else {
      Refuse(routing_id, schema::RejectReason::kMalformed, "unexpected message from a worker");
    }
  }

  void Welcome(const std::string& routing_id, const schema::Hello& hello, zmq::message_t& payload) {
    if (auto old = workers_.find(routing_id); old != workers_.end()) {
      // A worker that says hello again has dropped what it held.
      Drop(routing_id, "said hello again");
    }
    std::string address = "inproc";
    try {
      address = payload.gets("Peer-Address");
    } catch (const zmq::error_t&) {
    }
    WorkerState w;
    w.routing_id = routing_id;
    w.device = hello.device;
    w.capacity = hello.capacity;
    w.heartbeat = milliseconds(hello.heartbeat_ms);
    w.last_seen = Clock::now();
    w.next_heartbeat = Clock::now();
    {
      std::lock_guard lock(shared_.mutex);
      w.matches = Serves(options_.device, hello.device) &&
                  (!shared_.device || shared_.device->fingerprint == hello.device.fingerprint);
      if (w.matches && !shared_.device) shared_.device = hello.device;
      WorkerReport& report =
          shared_.reports[hello.worker_id + "@" + address + "#" + std::to_string(++shared_.joined)];
      report = {hello.worker_id, hello.device.name, address, w.matches, true, 0, 0, 0, 0};
      w.report = &report;
      if (w.matches) ++shared_.matching;
      shared_.changed.notify_all();
    }
    if (w.matches) {
      spdlog::log(address == "inproc" ? spdlog::level::debug : spdlog::level::info,
                  "worker {} joined from {}: {}{}, capacity {}", hello.worker_id, address,
                  hello.device.name, hello.device.simulated ? " (simulated)" : "", hello.capacity);
    } else {
      spdlog::warn(
          "worker {} joined from {} with device {} ({}): it does not serve '{}' and "
          "gets no queries",
          hello.worker_id, address, hello.device.name, hello.device.fingerprint.substr(0, 60),
          options_.device);
    }
    workers_.emplace(routing_id, std::move(w));
    SendTo(workers_.at(routing_id),
           schema::Encode(schema::Heartbeat{static_cast<uint32_t>(options_.heartbeat.count())}));
  }

  // The query `offset` of the current batch, or null for an id of another.
  QueryState* FindQuery(uint64_t query_id) {
    const uint64_t offset = query_id - first_id_;
    return specs_ != nullptr && offset < queries_.size() ? &queries_[offset] : nullptr;
  }

  void Complete(WorkerState& w, const schema::StageResult& result) {
    w.outstanding.erase(result.query_id);
    QueryState* q = FindQuery(result.query_id);
    if (q == nullptr || q->done) {
      std::lock_guard lock(shared_.mutex);
      ++w.report->late;  // a duplicate, or the answer to an earlier batch: ignored
      return;
    }
    {
      std::lock_guard lock(shared_.mutex);
      ++w.report->answered;
      if (!result.result.ok()) ++w.report->failed;
    }
    Finish(static_cast<uint32_t>(result.query_id - first_id_), result.result);
  }

  void Finish(uint32_t offset, const MeasureResult& result) {
    queries_[offset].done = true;
    queries_[offset].holder.clear();
    if (++done_ == queries_.size()) {
      specs_ = nullptr;  // the caller's specs may go away once it has every result
      pending_.clear();
    }
    {
      std::lock_guard lock(shared_.mutex);
      shared_.arrived.push_back({offset, result});
    }
    shared_.changed.notify_all();
  }

  // Gives back what `w` is measuring: those queries go to other workers.
  void Requeue(WorkerState& w, const std::string& why) {
    int requeued = 0;
    for (uint64_t id : w.outstanding) {
      QueryState* q = FindQuery(id);
      if (q == nullptr || q->done || q->holder != w.routing_id) continue;
      ++requeued;
      RetryOrFail(static_cast<uint32_t>(id - first_id_),
                  "worker " + w.report->worker_id + " " + why);
    }
    w.outstanding.clear();
    if (requeued == 0) return;
    spdlog::warn("re-queued {} queries of worker {} ({})", requeued, w.report->worker_id, why);
    std::lock_guard lock(shared_.mutex);
    w.report->requeued += requeued;
  }

  // Query `offset` lost its holder: try again elsewhere, or give up.
  void RetryOrFail(uint32_t offset, const std::string& why) {
    QueryState& q = queries_[offset];
    q.holder.clear();
    if (q.attempts < options_.max_attempts) {
      pending_.push_front(offset);
      return;
    }
    MeasureResult failed;
    failed.error = MeasureError::kTimeout;
    failed.error_message =
        "no answer after " + std::to_string(q.attempts) + " attempts (last: " + why + ")";
    spdlog::warn("query {}: giving up: {}", first_id_ + offset, failed.error_message);
    Finish(offset, failed);
  }

  void Housekeeping(Clock::time_point now) {
    std::vector<std::string> lost;
    for (auto& [id, w] : workers_) {
      const auto silent = now - w.last_seen;
      if (silent > options_.liveness * std::max(w.heartbeat, options_.heartbeat)) {
        spdlog::warn("worker {} lost: silent for {:.1f} s", w.report->worker_id, Seconds(silent));
        lost.push_back(id);
        continue;
      }
      CheckDeadlines(w, now);
      if (now >= w.next_heartbeat) {
        SendTo(w, schema::Encode(
                      schema::Heartbeat{static_cast<uint32_t>(options_.heartbeat.count())}));
      }
    }
    for (const std::string& id : lost) Drop(id, "lost");
    if (shared_.matching > 0 || specs_ == nullptr) {
      no_worker_since_.reset();
    } else {
      // Measuring with nobody to measure: wait a while for workers to come
      // back, then give up (everything answered so far is stored).
      if (!no_worker_since_) {
        no_worker_since_ = now;
        spdlog::warn("no worker serves '{}'; waiting up to {} s for one", options_.device,
                     options_.wait_for_workers.count() / 1000);
      } else if (now - *no_worker_since_ > options_.wait_for_workers) {
        std::lock_guard lock(shared_.mutex);
        shared_.fatal = "no worker served '" + options_.device + "' for " +
                        std::to_string(options_.wait_for_workers.count() / 1000) + " s with " +
                        std::to_string(queries_.size() - done_) +
                        " stages left; every result received is stored, so a rerun resumes";
        shared_.changed.notify_all();
      }
    }
  }

  void CheckDeadlines(WorkerState& w, Clock::time_point now) {
    for (uint64_t id : w.outstanding) {
      QueryState* q = FindQuery(id);
      if (q == nullptr || q->done || q->holder != w.routing_id || now < q->deadline) continue;
      // It stays in w.outstanding, so w's credit stays used until it answers.
      {
        std::lock_guard lock(shared_.mutex);
        ++w.report->requeued;
      }
      spdlog::warn("query {}: no answer from worker {} within {} s; retrying elsewhere", id,
                   w.report->worker_id, options_.query_timeout.count() / 1000.0);
      RetryOrFail(static_cast<uint32_t>(id - first_id_),
                  "timed out on worker " + w.report->worker_id);
    }
  }

  void Drop(const std::string& routing_id, const std::string& why) {
    auto it = workers_.find(routing_id);
    if (it == workers_.end()) return;
    Requeue(it->second, why);
    {
      std::lock_guard lock(shared_.mutex);
      it->second.report->connected = false;
      if (it->second.matches) --shared_.matching;
      shared_.changed.notify_all();
    }
    workers_.erase(it);
  }

  void Dispatch() {
    if (specs_ == nullptr) return;
    std::vector<std::string> unreachable;
    for (auto& [id, w] : workers_) {
      if (!w.matches) continue;
      while (w.outstanding.size() < w.capacity) {
        std::optional<uint32_t> next = NextPending();
        if (!next) break;
        const uint64_t query_id = first_id_ + *next;
        const std::string bytes =
            schema::EncodeQuery(query_id, *(*specs_)[*next], batch_size_, settings_);
        const Sent sent = SendTo(w, bytes);
        if (sent != Sent::kYes) {
          pending_.push_front(*next);
          if (sent == Sent::kGone) unreachable.push_back(id);
          break;  // kBusy: its queue is full for now; try again next round
        }
        QueryState& q = queries_[*next];
        ++q.attempts;
        q.holder = id;
        q.deadline = Clock::now() + options_.query_timeout;
        w.outstanding.insert(query_id);
      }
      if (pending_.empty()) break;
    }
    for (const std::string& id : unreachable) Drop(id, "unreachable");
  }

  std::optional<uint32_t> NextPending() {
    while (!pending_.empty()) {
      const uint32_t next = pending_.front();
      pending_.pop_front();
      if (!queries_[next].done) return next;
    }
    return std::nullopt;
  }

  enum class Sent { kYes, kBusy, kGone };

  // Never blocks. kGone: the peer has disconnected (ROUTER_MANDATORY makes
  // that an error instead of a silent drop); kBusy: its pipe is full.
  Sent SendTo(WorkerState& w, const std::string& bytes) {
    try {
      if (!router_.send(zmq::buffer(w.routing_id),
                        zmq::send_flags::sndmore | zmq::send_flags::dontwait)) {
        return Sent::kBusy;
      }
      // A message's frames are queued together: the second cannot fail now.
      router_.send(zmq::buffer(bytes), zmq::send_flags::dontwait);
    } catch (const zmq::error_t& e) {
      spdlog::debug("send to {} failed: {}", w.report->worker_id, e.what());
      return e.num() == EHOSTUNREACH ? Sent::kGone : Sent::kBusy;
    }
    w.next_heartbeat = Clock::now() + options_.heartbeat;
    return Sent::kYes;
  }

  void Refuse(const std::string& routing_id, schema::RejectReason reason, const std::string& why) {
    const std::string bytes = schema::Encode(schema::Reject{reason, why});
    try {
      if (router_.send(zmq::buffer(routing_id),
                       zmq::send_flags::sndmore | zmq::send_flags::dontwait)) {
        router_.send(zmq::buffer(bytes), zmq::send_flags::dontwait);
      }
    } catch (const zmq::error_t&) {
      // The peer is already gone; nothing to tell.
    }
  }

  const FarmOptions& options_;
  FarmShared& shared_;
  zmq::socket_t& router_;
  zmq::socket_t& control_;
  const std::vector<const StageSpec*>* specs_ = nullptr;
  int batch_size_ = 1;
  MeasureSettings settings_;
  uint64_t next_query_id_ = 0, first_id_ = 0;
  std::vector<QueryState> queries_;
  std::deque<uint32_t> pending_;
  size_t done_ = 0;
  std::map<std::string, WorkerState> workers_;
  std::optional<Clock::time_point> no_worker_since_;
  int64_t malformed_ = 0;
};

}  // namespace

void RunFarmRouter(const FarmOptions& options, FarmShared& shared, zmq::socket_t& router,
                   zmq::socket_t& control) {
  FarmRouter(options, shared, router, control).Run();
}

}  // namespace ios::coordinator::detail
