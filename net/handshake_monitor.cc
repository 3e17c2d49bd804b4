#include "net/handshake_monitor.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <zmq.h>

#include <atomic>
#include <cstring>
#include <map>
#include <string>
#include <system_error>
#include <utility>
#include <vector>
#include <zmq.hpp>

#include "common/error.h"

namespace ios::net {
namespace {

using Clock = std::chrono::steady_clock;

// Connections accepted and not yet through their handshake: enough for any
// burst; beyond it the oldest are forgotten (their address only is lost).
constexpr size_t kMaxPending = 1024;
// Distinct (address, problem) pairs remembered for rate limiting.
constexpr size_t kMaxRemembered = 4096;
constexpr const char* kUnknownAddress = "an unknown address";

// The peer's IP address (no port: a reconnecting peer changes ports), or
// empty when the connection is already gone.
std::string PeerAddress(int fd) {
  sockaddr_storage address{};
  socklen_t size = sizeof address;
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&address), &size) != 0) return {};
  char text[INET6_ADDRSTRLEN] = {};
  if (address.ss_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(&address)->sin_addr, text, sizeof text);
  } else if (address.ss_family == AF_INET6) {
    inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(&address)->sin6_addr, text, sizeof text);
  } else if (address.ss_family == AF_UNIX) {
    return "a local (ipc) peer";
  }
  return text;
}

}  // namespace

struct HandshakeMonitor::State {
  State(zmq::context_t& context, bool is_curve, std::chrono::seconds quiet_period)
      : socket(context, zmq::socket_type::pair), curve(is_curve), quiet(quiet_period) {}

  void Handle(uint16_t event, uint32_t value);
  //! Logs `text` unless the same `problem` from `address` was logged less
  //! than `quiet` ago (then it is counted, and the count said next time).
  void Report(const std::string& address, const std::string& problem, const std::string& text);

  zmq::socket_t socket;
  const bool curve;
  const Clock::duration quiet;
  std::vector<std::pair<int, std::string>> pending;  // fd, address; newest last
  struct Logged {
    Clock::time_point at;
    int64_t held_back = 0;
  };
  std::map<std::string, Logged> logged;  // by problem + '\n' + address
  std::atomic<int64_t> failures{0};
};

void HandshakeMonitor::State::Handle(uint16_t event, uint32_t value) {
  const int fd = static_cast<int>(value);  // of ACCEPTED, DISCONNECTED and CLOSED
  switch (event) {
    case ZMQ_EVENT_ACCEPTED:
      if (pending.size() >= kMaxPending) pending.erase(pending.begin());
      pending.emplace_back(fd, PeerAddress(fd));
      return;
    case ZMQ_EVENT_DISCONNECTED:
    case ZMQ_EVENT_CLOSED:
      std::erase_if(pending, [fd](const auto& entry) { return entry.first == fd; });
      return;
    case ZMQ_EVENT_HANDSHAKE_SUCCEEDED:
      if (!pending.empty()) pending.pop_back();
      return;
    case ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL:
    case ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL:
    case ZMQ_EVENT_HANDSHAKE_FAILED_AUTH:
      break;
    default:
      return;
  }
  ++failures;
  std::string address;
  if (!pending.empty()) {
    address = pending.back().second;
    pending.pop_back();
  }
  if (address.empty()) address = kUnknownAddress;
  if (event == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH) {
    // The ZAP handler refused it and has said so, with the key.
    spdlog::debug("handshake with {} refused by the authenticator (status {})", address, value);
    return;
  }
  // A peer of the other security mechanism fails in one of two ways,
  // whichever side notices first: we see the mismatch, or it hangs up on
  // us. Both are reported as one problem, so one line per peer either way.
  const std::string mechanism_advice =
      curve ? "probably a worker that does not use CURVE: start it with --curve-key WORKER.key "
              "--curve-server-key COORDINATOR.pub (docs/security.md)"
            : "probably a worker that uses CURVE: this coordinator runs without it; start the "
              "worker without --curve-key and --curve-server-key, or the coordinator with "
              "--curve-secret-key and --curve-allow";
  if (event == ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL) {
    const int error = static_cast<int>(value);  // an errno
    Report(address, "mechanism",
           "handshake failed from " + address + " (" + std::generic_category().message(error) +
               "): " + mechanism_advice);
    return;
  }
  switch (value) {
    case ZMQ_PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH:
      Report(address, "mechanism",
             std::string("refused a peer of another security mechanism from ") + address + ": " +
                 mechanism_advice);
      return;
    case ZMQ_PROTOCOL_ERROR_ZMTP_CRYPTOGRAPHIC:
      Report(address, "key",
             "CURVE handshake failed from " + address +
                 ": the worker's --curve-server-key is not this coordinator's public key (the "
                 ".pub of the --curve-secret-key file)");
      return;
    default: {
      char code[16];
      std::snprintf(code, sizeof code, "0x%08x", value);
      Report(address, code,
             "handshake failed from " + address + ": ZMTP protocol error " + code +
                 " (a peer that is not an ios-worker of this version?)");
    }
  }
}

void HandshakeMonitor::State::Report(const std::string& address, const std::string& problem,
                                     const std::string& text) {
  const auto now = Clock::now();
  const auto recent = [&](const Logged& entry) { return now - entry.at < quiet; };
  // libzmq may have closed the connection before its address could be read:
  // such a failure is held back while the problem was logged recently for
  // any address, since it is most likely the same retrying peer.
  if (address == kUnknownAddress) {
    for (auto& [key, entry] : logged) {
      if (key.starts_with(problem + '\n') && recent(entry)) {
        ++entry.held_back;
        return;
      }
    }
  }
  const std::string key = problem + '\n' + address;
  auto found = logged.find(key);
  if (found != logged.end() && recent(found->second)) {
    ++found->second.held_back;
    return;
  }
  const int64_t held_back = found == logged.end() ? 0 : found->second.held_back;
  if (found == logged.end()) {
    if (logged.size() >= kMaxRemembered) logged.clear();
    found = logged.emplace(key, Logged{}).first;
  }
  found->second = {now, 0};
  if (held_back > 0) {
    spdlog::warn("{} ({} more since the last report)", text, held_back);
  } else {
    spdlog::warn("{}", text);
  }
}

HandshakeMonitor::HandshakeMonitor(Context& context, zmq::socket_t& socket, bool curve,
                                   std::chrono::seconds quiet)
    : state_(std::make_unique<State>(context.zmq(), curve, quiet)) {
  // One name per monitor: a context may hold several.
  const std::string endpoint =
      "inproc://ios-handshake-monitor-" + std::to_string(reinterpret_cast<uintptr_t>(this));
  const int events = ZMQ_EVENT_ACCEPTED | ZMQ_EVENT_DISCONNECTED | ZMQ_EVENT_CLOSED |
                     ZMQ_EVENT_HANDSHAKE_SUCCEEDED | ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL |
                     ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL | ZMQ_EVENT_HANDSHAKE_FAILED_AUTH;
  if (zmq_socket_monitor(socket.handle(), endpoint.c_str(), events) != 0) {
    throw Error(std::string("cannot monitor the farm's socket: ") + zmq_strerror(zmq_errno()));
  }
  try {
    state_->socket.set(zmq::sockopt::linger, 0);
    state_->socket.connect(endpoint);
  } catch (const zmq::error_t& e) {
    throw Error(std::string("cannot monitor the farm's socket: ") + e.what());
  }
}

// The monitored socket may be closed already (it ends the monitor); only our
// end is ours to close.
HandshakeMonitor::~HandshakeMonitor() = default;

zmq::socket_t& HandshakeMonitor::events() { return state_->socket; }

void HandshakeMonitor::Drain() noexcept {
  try {
    for (;;) {
      zmq::message_t header, endpoint;
      if (!state_->socket.recv(header, zmq::recv_flags::dontwait)) return;
      // An event is two frames: 2 bytes of event, 4 of value; then the endpoint.
      if (header.more() && !state_->socket.recv(endpoint, zmq::recv_flags::dontwait)) return;
      if (header.size() != 6) continue;
      uint16_t event = 0;
      uint32_t value = 0;
      std::memcpy(&event, header.data(), sizeof event);
      std::memcpy(&value, static_cast<const char*>(header.data()) + sizeof event, sizeof value);
      state_->Handle(event, value);
    }
  } catch (const std::exception& e) {
    spdlog::debug("handshake monitor: {}", e.what());
  }
}

int64_t HandshakeMonitor::failures() const { return state_->failures.load(); }

}  // namespace ios::net
