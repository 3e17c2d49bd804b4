// Helpers for farm tests: real stage specs from the zoo, hand-driven
// protocol peers (a fake worker, a fake coordinator), result collection.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>
#include <zmq.hpp>

#include "common/zoo.h"
#include "coordinator/farm.h"
#include "coordinator/search.h"
#include "devices/backend.h"
#include "net/context.h"
#include "schema/protocol.h"

namespace ios::farm_testing {

using namespace std::chrono_literals;
using coordinator::Farm;
using coordinator::FarmOptions;

//! The distinct stages of a zoo model, as specs a Measurer takes.
struct ZooStages {
  std::vector<StageSpec> specs;
  std::vector<const StageSpec*> pointers;
};

inline ZooStages StagesOf(const std::string& model, size_t limit = SIZE_MAX) {
  const Graph graph = BuildZooModel(model);
  const coordinator::SearchPlan plan = coordinator::PlanSearch(graph, {});
  StageKeyer keyer(graph);
  ZooStages stages;
  for (size_t i = 0; i < plan.stage_count() && i < limit; ++i) {
    stages.specs.push_back(keyer.Spec(plan.StageOf(static_cast<int>(i))));
  }
  for (const StageSpec& spec : stages.specs) stages.pointers.push_back(&spec);
  return stages;
}

//! Fast timers so lost workers and deadlines show within a test's patience.
inline FarmOptions FastOptions() {
  FarmOptions options;
  options.heartbeat = 50ms;
  options.wait_for_workers = 10s;
  options.query_timeout = 10s;
  return options;
}

//! FastOptions, bound to an ephemeral loopback port for remote peers.
inline FarmOptions LoopbackOptions(int local_workers) {
  FarmOptions options = FastOptions();
  options.bind = "tcp://127.0.0.1:*";
  options.local_workers = local_workers;
  return options;
}

//! Runs MeasureAll and returns one result per spec, failing the test if any
//! spec gets none or more than one.
inline std::vector<MeasureResult> MeasureEach(coordinator::Measurer& measurer,
                                              const std::vector<const StageSpec*>& specs,
                                              int batch_size = 1) {
  std::vector<std::optional<MeasureResult>> results(specs.size());
  measurer.MeasureAll(specs, batch_size, MeasureSettings{},
                      [&](std::span<const coordinator::IndexedResult> arrived) {
                        for (const auto& r : arrived) {
                          EXPECT_LT(r.index, specs.size());
                          if (r.index >= specs.size()) continue;
                          EXPECT_FALSE(results[r.index].has_value()) << "twice: " << r.index;
                          results[r.index] = r.result;
                        }
                      });
  std::vector<MeasureResult> out;
  for (size_t i = 0; i < results.size(); ++i) {
    EXPECT_TRUE(results[i].has_value()) << "no result for spec " << i;
    out.push_back(results[i].value_or(MeasureResult{}));
  }
  return out;
}

//! One end of a protocol conversation driven by the test: a DEALER that
//! plays a worker, or a ROUTER that plays a coordinator.
class Peer {
 public:
  Peer(net::Context& context, zmq::socket_type type) : socket_(context.zmq(), type) {
    socket_.set(zmq::sockopt::linger, 0);
    // A ROUTER silently drops what exceeds a slow peer's queue; a test that
    // floods a worker must wait instead, or its last message may vanish.
    if (type == zmq::socket_type::router) socket_.set(zmq::sockopt::router_mandatory, 1);
  }
  void Connect(const std::string& endpoint) { socket_.connect(endpoint); }
  //! Binds an ephemeral loopback port; returns the endpoint to connect to.
  std::string BindLoopback() {
    socket_.bind("tcp://127.0.0.1:*");
    return socket_.get(zmq::sockopt::last_endpoint);
  }

  //! DEALER: one frame. ROUTER: to the last peer heard from.
  void Send(const std::string& bytes) {
    if (socket_.get(zmq::sockopt::type) == ZMQ_ROUTER) {
      socket_.send(zmq::buffer(peer_), zmq::send_flags::sndmore);
    }
    socket_.send(zmq::buffer(bytes), zmq::send_flags::none);
  }
  void Send(const schema::Message& message) { Send(schema::Encode(message)); }

  void SendHello(const std::string& device = "sim:v100", uint32_t capacity = 4,
                 uint32_t heartbeat_ms = 50) {
    schema::Hello hello;
    hello.worker_id = "fake";
    hello.device = devices::BuiltinRegistry().OpenBackend(device)->Device();
    hello.capacity = capacity;
    hello.heartbeat_ms = heartbeat_ms;
    Send(hello);
  }

  //! A DEALER connected to `farm` that has said hello as a sim:v100 worker.
  static Peer FakeWorker(net::Context& context, const Farm& farm, uint32_t capacity) {
    Peer peer(context, zmq::socket_type::dealer);
    peer.Connect(farm.BoundEndpoint());
    peer.SendHello("sim:v100", capacity);
    return peer;
  }

  //! The next decodable message within `timeout`, skipping nothing.
  std::optional<schema::Message> Receive(std::chrono::milliseconds timeout) {
    zmq::pollitem_t item{socket_.handle(), 0, ZMQ_POLLIN, 0};
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      zmq::poll(&item, 1, 10ms);
      if (!(item.revents & ZMQ_POLLIN)) continue;
      zmq::message_t frame;
      if (!socket_.recv(frame, zmq::recv_flags::dontwait)) continue;
      if (socket_.get(zmq::sockopt::type) == ZMQ_ROUTER) {
        peer_ = frame.to_string();
        if (!socket_.recv(frame, zmq::recv_flags::none)) continue;
      }
      auto decoded = schema::Decode(frame.to_string_view());
      if (auto* message = std::get_if<schema::Message>(&decoded)) return std::move(*message);
    }
    return std::nullopt;
  }

  //! Receives until a message of type T arrives (others are skipped).
  template <typename T>
  std::optional<T> ReceiveA(std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      auto message = Receive(std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now()));
      if (message && std::holds_alternative<T>(*message)) return std::get<T>(*message);
    }
    return std::nullopt;
  }

  zmq::socket_t& socket() { return socket_; }
  //! ROUTER: the routing id of the last peer heard from.
  const std::string& last_peer() const { return peer_; }

 private:
  zmq::socket_t socket_;
  std::string peer_;
};

}  // namespace ios::farm_testing
