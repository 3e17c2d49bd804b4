// The handshake monitor on real loopback sockets: peers that fail the
// handshake before any message (no CURVE, another server key, CURVE against
// a plain server) are logged with their address, once per problem however
// often libzmq retries. Every wait is bounded.
#include "net/handshake_monitor.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <spdlog/sinks/ringbuffer_sink.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>
#include <zmq.hpp>

#include "net/context.h"
#include "net/curve.h"
#include "tests/net/captured_log.h"

namespace ios::net {
namespace {

using namespace std::chrono_literals;

using testing::CapturedLog;

class HandshakeMonitorTest : public ::testing::Test {
 protected:
  // A ROUTER on an ephemeral loopback port, watched; CURVE when `curve`.
  std::string StartServer(bool curve) {
    server_ = std::make_unique<zmq::socket_t>(context_.zmq(), zmq::socket_type::router);
    server_->set(zmq::sockopt::linger, 0);
    if (curve) {
      authenticator_ = std::make_unique<CurveAuthenticator>(
          context_, std::vector<std::string>{client_keys_.public_key});
      MakeCurveServer(*server_, server_keys_);
    }
    monitor_ = std::make_unique<HandshakeMonitor>(context_, *server_, curve);
    server_->bind("tcp://127.0.0.1:*");
    return server_->get(zmq::sockopt::last_endpoint);
  }
  // A DEALER that connects (and keeps retrying the handshake on its own).
  zmq::socket_t& Client(const std::string& endpoint, const std::string& server_key) {
    clients_.push_back(std::make_unique<zmq::socket_t>(context_.zmq(), zmq::socket_type::dealer));
    zmq::socket_t& client = *clients_.back();
    client.set(zmq::sockopt::linger, 0);
    client.set(zmq::sockopt::reconnect_ivl, 10);
    if (!server_key.empty()) MakeCurveClient(client, client_keys_, server_key);
    client.connect(endpoint);
    return client;
  }
  // Drains the monitor until it has seen `count` failures (bounded).
  bool DrainUntil(int64_t count) {
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (monitor_->failures() < count && std::chrono::steady_clock::now() < deadline) {
      zmq::pollitem_t item{monitor_->events().handle(), 0, ZMQ_POLLIN, 0};
      zmq::poll(&item, 1, 20ms);
      monitor_->Drain();
    }
    return monitor_->failures() >= count;
  }
  void TearDown() override {
    clients_.clear();
    if (server_) server_->close();
    monitor_.reset();
    authenticator_.reset();
  }

  Context context_;
  const CurveKeyPair server_keys_ = GenerateCurveKeyPair();
  const CurveKeyPair client_keys_ = GenerateCurveKeyPair();
  std::unique_ptr<CurveAuthenticator> authenticator_;
  std::unique_ptr<zmq::socket_t> server_;
  std::unique_ptr<HandshakeMonitor> monitor_;
  std::vector<std::unique_ptr<zmq::socket_t>> clients_;
};

TEST_F(HandshakeMonitorTest, WorkerWithoutCurveIsLoggedOnceHoweverOftenItRetries) {
  CapturedLog log;
  const std::string endpoint = StartServer(/*curve=*/true);
  // libzmq does not retry after a mechanism mismatch; ios-worker does, with
  // a new socket: so do we.
  for (int attempt = 1; attempt <= 4; ++attempt) {
    Client(endpoint, "");
    ASSERT_TRUE(DrainUntil(attempt)) << "attempt " << attempt;
  }
  const auto lines = log.With("does not use CURVE");
  ASSERT_GE(lines.size(), 1u);
  EXPECT_LE(lines.size(), 2u) << "one line (two when the first address was already gone)";
  EXPECT_THAT(lines.back(), ::testing::HasSubstr("start it with --curve-key"));
  EXPECT_EQ(log.With("CURVE handshake failed").size(), 0u);
}

TEST_F(HandshakeMonitorTest, WorkerWithAnotherServersKeyIsLoggedOnce) {
  CapturedLog log;
  const std::string endpoint = StartServer(/*curve=*/true);
  Client(endpoint, GenerateCurveKeyPair().public_key);
  ASSERT_TRUE(DrainUntil(6)) << "libzmq retries this handshake on its own, every 10 ms";
  const auto lines = log.With("CURVE handshake failed");
  ASSERT_GE(lines.size(), 1u);
  EXPECT_LE(lines.size(), 2u);
  EXPECT_THAT(lines.back(), ::testing::HasSubstr("not this coordinator's public key"));
}

TEST_F(HandshakeMonitorTest, CurveWorkerAtAPlainServerIsLogged) {
  CapturedLog log;
  const std::string endpoint = StartServer(/*curve=*/false);
  for (int attempt = 1; attempt <= 3; ++attempt) {
    Client(endpoint, server_keys_.public_key);
    ASSERT_TRUE(DrainUntil(attempt)) << "attempt " << attempt;
  }
  const auto lines = log.With("a worker that uses CURVE");
  ASSERT_GE(lines.size(), 1u);
  EXPECT_LE(lines.size(), 2u);
  EXPECT_THAT(lines.back(), ::testing::HasSubstr("runs without it"));
}

TEST_F(HandshakeMonitorTest, ListedWorkerIsNoFailure) {
  CapturedLog log;
  const std::string endpoint = StartServer(/*curve=*/true);
  zmq::socket_t& client = Client(endpoint, server_keys_.public_key);
  client.send(zmq::str_buffer("hello"), zmq::send_flags::none);
  zmq::pollitem_t item{server_->handle(), 0, ZMQ_POLLIN, 0};
  ASSERT_EQ(zmq::poll(&item, 1, 5s), 1) << "the message came through";
  monitor_->Drain();
  EXPECT_EQ(monitor_->failures(), 0);
  EXPECT_TRUE(log.With("handshake").empty());
}

}  // namespace
}  // namespace ios::net
