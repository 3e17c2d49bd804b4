// Who failed to get in: a ZeroMQ socket monitor on the coordinator's ROUTER
// that logs every peer whose handshake failed before any message could flow
// (a worker without CURVE, one given another coordinator's public key, or a
// CURVE worker meeting a coordinator without it). Refusals by the allow list
// are the ZAP handler's to log (curve.h); these never reach it.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>

#include "net/context.h"

namespace zmq {
class socket_t;
}

namespace ios::net {

//! Watches the connections of one listening socket. A failure is a warning
//! (spdlog) naming the peer's address and what to fix; the same problem from
//! the same address is logged again only after `quiet`, with how many were
//! held back meanwhile. The address is best effort: libzmq reports the
//! failure without the connection, so it is that of the connection accepted
//! last, and it is unknown when libzmq closed the connection before it could
//! be read (such a failure is held back while its problem was logged within
//! `quiet`: it is most likely the same peer retrying).
//! Made on one thread; then Drain may run on another (one at a time), and
//! the destructor after the last Drain.
class HandshakeMonitor {
 public:
  //! Call before `socket` binds. `curve`: whether `socket` is a CURVE server
  //! (the advice in the messages depends on it). Throws ios::Error when
  //! libzmq refuses to monitor.
  HandshakeMonitor(Context& context, zmq::socket_t& socket, bool curve,
                   std::chrono::seconds quiet = std::chrono::seconds(60));
  ~HandshakeMonitor();
  HandshakeMonitor(const HandshakeMonitor&) = delete;
  HandshakeMonitor& operator=(const HandshakeMonitor&) = delete;

  //! The socket the events arrive on, to poll for input (ZMQ_POLLIN).
  zmq::socket_t& events();
  //! Reads and logs every pending event. Never blocks and never throws.
  void Drain() noexcept;
  //! Failed handshakes seen so far (logged or held back).
  int64_t failures() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace ios::net
