#include "coordinator/farm_router.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <deque>
#include <set>
#include <unordered_set>
#include <zmq.hpp>

#include "net/handshake_monitor.h"
#include "schema/protocol.h"

namespace ios::coordinator::detail {

namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// What the router thread knows of one connected worker.
struct WorkerState {
  std::string routing_id;
  DeviceInfo device;
  uint32_t capacity = 1;
  uint32_t devices = 1;  // identical devices it owns (Hello::devices)
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
  std::string bytes;  // the encoded query (ours: see PostedQuery); freed when done
  bool network = false;
};

class FarmRouter {
 public:
  FarmRouter(const FarmOptions& options, FarmShared& shared, zmq::socket_t& router,
             zmq::socket_t& control, net::HandshakeMonitor* monitor)
      : options_(options), shared_(shared), router_(router), control_(control), monitor_(monitor) {}

  void Run(const std::stop_token& stop) noexcept {
    try {
      RouterLoop(stop);
    } catch (const std::exception& e) {
      Fail(e.what());
    } catch (...) {
      Fail("unknown exception");
    }
    try {
      // Tell the workers, so they go back to waiting for the next coordinator
      // at once instead of after their liveness window.
      for (auto& [id, w] : workers_)
        SendTo(w, schema::Encode(schema::Shutdown{"coordinator exiting"}));
    } catch (const std::exception& e) {
      spdlog::debug("farm: saying goodbye: {}", e.what());
    }
    router_.close();
    control_.close();
  }

 private:
  void Fail(const std::string& what) noexcept {
    try {
      spdlog::error("farm: {}", what);
      std::lock_guard lock(shared_.mutex);
      shared_.fatal = "the farm's message loop failed: " + what;
      shared_.changed.notify_all();
    } catch (...) {
      // Out of memory while reporting: the caller's waits still end on their own.
    }
  }

  void RouterLoop(const std::stop_token& stop) {
    zmq::pollitem_t items[] = {{router_.handle(), 0, ZMQ_POLLIN, 0},
                               {control_.handle(), 0, ZMQ_POLLIN, 0},
                               {nullptr, 0, ZMQ_POLLIN, 0}};
    const int item_count = monitor_ != nullptr ? 3 : 2;
    if (monitor_ != nullptr) items[2].socket = monitor_->events().handle();
    const milliseconds tick =
        std::clamp(options_.heartbeat / 4, milliseconds(5), milliseconds(100));
    auto next_tick = Clock::now();
    while (!stop.stop_requested()) {
      const auto wait = std::max(
          milliseconds(0), std::chrono::duration_cast<milliseconds>(next_tick - Clock::now()));
      zmq::poll(items, item_count, wait);
      if (items[1].revents & ZMQ_POLLIN) {
        zmq::message_t command;
        bool update = false;
        while (control_.recv(command, zmq::recv_flags::dontwait)) {
          if (command.to_string_view() == "s") return;
          update = true;
        }
        if (update) Sync();
      }
      if (monitor_ != nullptr && (items[2].revents & ZMQ_POLLIN)) monitor_->Drain();
      if (items[0].revents & ZMQ_POLLIN) ReceiveAll();
      const auto now = Clock::now();
      if (now >= next_tick) {
        next_tick = now + tick;
        Housekeeping(now);
      }
      Dispatch();
    }
  }

  // Catches up with the caller: a batch closed or opened, queries posted.
  void Sync() {
    std::vector<PostedQuery> taken;
    {
      std::lock_guard lock(shared_.mutex);
      const FarmBatch& batch = shared_.batch;
      if (active_ && (!batch.open || batch.generation != generation_)) EndBatch();
      if (!active_ && batch.open && batch.generation != generation_) {
        active_ = true;
        generation_ = batch.generation;
        first_id_ = batch.first_query_id;
        min_devices_ = batch.min_devices;
        queries_.assign(batch.size, QueryState{});
        open_ = 0;
      }
      // A growing batch (MeasureStream): room for the queries it added.
      if (active_ && batch.size > queries_.size()) queries_.resize(batch.size);
      if (active_) taken.swap(shared_.posted);
    }
    for (PostedQuery& posted : taken) {
      if (posted.offset >= queries_.size()) continue;
      queries_[posted.offset].bytes = std::move(posted.bytes);
      queries_[posted.offset].network = posted.network;
      pending_.push_back(posted.offset);
      ++open_;
    }
  }

  // Forgets the batch: its queries are no longer sent, and answers to them
  // count as late. Workers still measuring them keep that credit used until
  // they answer, as for any query taken back.
  void EndBatch() {
    active_ = false;
    queries_.clear();
    queries_.shrink_to_fit();
    pending_.clear();
    open_ = 0;
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
      // A worker we dropped (lost) or that reconnected before saying hello
      // again: an answer to a query still open is as good as any.
      if (auto* result = std::get_if<schema::StageResult>(&message)) {
        // ...but a worker's timeout is no answer: it gave the stage up, and
        // the query may be in another worker's hands by now.
        if (QueryState* q = FindQuery(result->query_id);
            q != nullptr && !q->done && result->result.error != MeasureError::kTimeout) {
          spdlog::debug("query {}: answered by a worker not (or no longer) joined",
                        result->query_id);
          Finish(static_cast<uint32_t>(result->query_id - first_id_), result->result);
        }
      }
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
      WorkerState& w = old->second;
      if (w.device.fingerprint == hello.device.fingerprint) {
        // The same worker session on a new connection (its routing id is
        // fixed for its life): it keeps measuring what it holds, and answers
        // on the new connection are accepted. What was lost with the old
        // connection is caught by the queries' deadlines.
        if (w.matches)
          shared_.credit += static_cast<int>(hello.capacity) - static_cast<int>(w.capacity);
        w.capacity = hello.capacity;
        w.heartbeat = milliseconds(hello.heartbeat_ms);
        w.last_seen = Clock::now();
        spdlog::info("worker {} reconnected; it keeps its {} queries", hello.worker_id,
                     w.outstanding.size());
        SendTo(w, schema::Encode(
                      schema::Heartbeat{static_cast<uint32_t>(options_.heartbeat.count())}));
        return;
      }
      Drop(routing_id, "said hello again as another device");
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
    w.devices = hello.devices;
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
      if (w.matches) {
        ++shared_.matching;
        shared_.credit += static_cast<int>(w.capacity);
        if (w.devices >= 2) ++shared_.multi_device;
      }
      shared_.changed.notify_all();
    }
    if (w.matches) {
      spdlog::log(address == "inproc" ? spdlog::level::debug : spdlog::level::info,
                  "worker {} joined from {}: {}{}, capacity {}", hello.worker_id, address,
                  hello.device.name, hello.device.simulated ? " (simulated)" : "", hello.capacity);
      std::string properties;
      for (const auto& [key, value] : hello.properties) {
        properties += (properties.empty() ? "" : ", ") + key + "=" + value;
      }
      spdlog::debug("worker {} properties: {}", hello.worker_id, properties);
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
    return active_ && offset < queries_.size() ? &queries_[offset] : nullptr;
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
      ++(q->network ? w.report->networks : w.report->answered);
      if (!result.result.ok()) ++w.report->failed;
    }
    const auto offset = static_cast<uint32_t>(result.query_id - first_id_);
    if (result.result.error == MeasureError::kTimeout) {
      GaveUp(w, offset, result.result.error_message);
      return;
    }
    Finish(offset, result.result, result.link);
  }

  // A worker's measurement outlived its bound (worker::MeasurementBound):
  // the worker gave it up, takes no more work and exits. Like a lost
  // worker's, the query is measured elsewhere within --max-attempts, and so
  // is what that worker still held. Drops `w`.
  void GaveUp(WorkerState& w, uint32_t offset, const std::string& message) {
    const std::string worker_id = w.report->worker_id, routing_id = w.routing_id;
    spdlog::warn("query {}: worker {} gave up measuring stage {}: {}", first_id_ + offset,
                 worker_id, DescribeStage(queries_[offset].bytes), message);
    // Unless its deadline had already sent it to another worker.
    if (queries_[offset].holder == routing_id) {
      {
        std::lock_guard lock(shared_.mutex);
        ++w.report->requeued;
      }
      RetryOrFail(offset, "worker " + worker_id + " gave it up: " + message);
    }
    Drop(routing_id, "gave up a hung measurement");
  }

  // The stage a query's bytes hold, for a log line.
  static std::string DescribeStage(const std::string& bytes) {
    auto decoded = schema::Decode(bytes);
    auto* message = std::get_if<schema::Message>(&decoded);
    auto* query = message != nullptr ? std::get_if<schema::StageQuery>(message) : nullptr;
    return query != nullptr ? query->Describe() : "(unreadable)";
  }

  void Finish(uint32_t offset, const MeasureResult& result,
              const std::optional<LinkMeasurement>& link = std::nullopt) {
    QueryState& q = queries_[offset];
    q.done = true;
    q.holder.clear();
    std::string().swap(q.bytes);
    --open_;
    {
      std::lock_guard lock(shared_.mutex);
      // The caller may have closed the batch (and opened another) meanwhile.
      if (!shared_.batch.open || shared_.batch.generation != generation_) return;
      shared_.arrived.push_back({offset, result, link});
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
    if (shared_.matching > 0 || !active_ || open_ == 0) {
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
                        std::to_string(open_) +
                        " stages left; every result received is stored, so a rerun resumes";
        shared_.changed.notify_all();
      }
    }
    if (active_ && open_ > 0 && min_devices_ > 1) FailIfNoWorkerOwnsEnoughDevices();
  }

  // A link query waits for no one: without a serving worker that owns the
  // devices it needs (none joined, or the last one left), it fails now.
  void FailIfNoWorkerOwnsEnoughDevices() {
    for (const auto& [id, w] : workers_) {
      if (w.matches && w.devices >= min_devices_) return;
    }
    MeasureResult none;
    none.error = MeasureError::kUnsupported;
    none.error_message =
        "no worker serving '" + options_.device + "' owns " + std::to_string(min_devices_) +
        " such devices (start one with ios-worker --devices " + std::to_string(min_devices_) + ")";
    for (uint32_t offset = 0; offset < queries_.size(); ++offset) {
      if (!queries_[offset].done && !queries_[offset].bytes.empty()) Finish(offset, none);
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
      if (it->second.matches) {
        --shared_.matching;
        shared_.credit -= static_cast<int>(it->second.capacity);
        if (it->second.devices >= 2) --shared_.multi_device;
      }
      shared_.changed.notify_all();
    }
    workers_.erase(it);
  }

  // Hands pending queries out one per worker in turn, so that a short queue
  // (a lazy search's next few stages) is spread over every worker instead of
  // filling the first workers' credit while the others idle.
  void Dispatch() {
    if (!active_) return;
    std::vector<std::string> unreachable;
    std::set<std::string> full;  // busy pipe or no credit left: skipped until the next call
    bool sent_any = true;
    while (sent_any && !pending_.empty()) {
      sent_any = false;
      for (auto& [id, w] : workers_) {
        if (!w.matches || w.devices < min_devices_ || full.count(id) ||
            w.outstanding.size() >= w.capacity) {
          continue;
        }
        std::optional<uint32_t> next = NextPending();
        if (!next) break;
        const uint64_t query_id = first_id_ + *next;
        const Sent sent = SendTo(w, queries_[*next].bytes);
        if (sent != Sent::kYes) {
          pending_.push_front(*next);
          if (sent == Sent::kGone) unreachable.push_back(id);
          full.insert(id);  // kBusy: its queue is full for now; try again next round
          continue;
        }
        QueryState& q = queries_[*next];
        ++q.attempts;
        q.holder = id;
        q.deadline = Clock::now() + options_.query_timeout;
        w.outstanding.insert(query_id);
        sent_any = true;
      }
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
  net::HandshakeMonitor* monitor_;
  bool active_ = false;  // a batch is open
  uint64_t generation_ = 0, first_id_ = 0;
  uint32_t min_devices_ = 1;  // of the batch: a worker owning fewer gets none of it
  std::vector<QueryState> queries_;
  std::deque<uint32_t> pending_;
  size_t open_ = 0;  // queries posted to the router and not answered yet
  std::map<std::string, WorkerState> workers_;
  std::optional<Clock::time_point> no_worker_since_;
  int64_t malformed_ = 0;
};

}  // namespace

void RunFarmRouter(const FarmOptions& options, FarmShared& shared, zmq::socket_t& router,
                   zmq::socket_t& control, net::HandshakeMonitor* monitor,
                   std::stop_token stop) noexcept {
  FarmRouter(options, shared, router, control, monitor).Run(stop);
}

}  // namespace ios::coordinator::detail
