#include "net/endpoint.h"

#include <algorithm>
#include <cstddef>

namespace ios::net {
namespace {

constexpr std::string_view kTcp = "tcp://", kIpc = "ipc://", kInproc = "inproc://";
// sizeof(sockaddr_un::sun_path) on Linux, less the terminating NUL.
constexpr size_t kMaxIpcPath = 107;
constexpr long kMaxPort = 65535;

bool AllDigits(std::string_view text) {
  return !text.empty() &&
         std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
}

std::string TcpProblem(std::string_view rest, EndpointUse use) {
  const bool bind = use == EndpointUse::kBind;
  // The port follows the last ':' (an IPv6 host is bracketed: [::1]:5555).
  if (rest.front() == '[' && rest.find(']') == std::string_view::npos) {
    return "an IPv6 host needs its closing ']', e.g. tcp://[::1]:5555";
  }
  const size_t colon = rest.rfind(':');
  if (colon == std::string_view::npos || (rest.front() == '[' && colon < rest.find(']'))) {
    return "expected tcp://HOST:PORT (no port given)";
  }
  const std::string_view host = rest.substr(0, colon), port = rest.substr(colon + 1);
  if (host.empty()) return "expected tcp://HOST:PORT (no host given)";
  if (host.front() == '[' && host.back() != ']') {
    return "expected tcp://[HOST]:PORT (something between ']' and the port)";
  }
  if (host == "*" && !bind)
    return "'*' (any interface) is for --bind; connect to a host name or address";
  if (host.find(';') != std::string_view::npos)
    return "a source address (HOST;HOST) is not supported";
  if (port == "*") {
    if (bind) return {};
    return "port '*' (an ephemeral port) is for --bind; connect to the port the coordinator "
           "printed";
  }
  if (!AllDigits(port)) {
    return "port '" + std::string(port) + "' is not a number from 1 to 65535" +
           (bind ? " (or '*' for an ephemeral port)" : "");
  }
  // At most 6 digits are looked at, so a long run of digits cannot overflow.
  const long number = port.size() > 6 ? kMaxPort + 1 : std::stol(std::string(port));
  if (number < 1 || number > kMaxPort) {
    return "port " + std::string(port) + " is out of range: ports go from 1 to 65535" +
           (bind ? " (or '*' for an ephemeral port)" : "");
  }
  return {};
}

}  // namespace

std::string EndpointProblem(std::string_view endpoint, EndpointUse use) {
  if (endpoint.empty()) return "empty; expected tcp://HOST:PORT, ipc://PATH or inproc://NAME";
  const bool unprintable = std::any_of(endpoint.begin(), endpoint.end(), [](char c) {
    return static_cast<unsigned char>(c) <= 0x20 || c == 0x7f;
  });
  if (unprintable) return "contains whitespace or control characters";
  if (endpoint.starts_with(kTcp)) {
    const std::string_view rest = endpoint.substr(kTcp.size());
    if (rest.empty()) return "expected tcp://HOST:PORT (nothing after tcp://)";
    return TcpProblem(rest, use);
  }
  if (endpoint.starts_with(kIpc)) {
    const std::string_view path = endpoint.substr(kIpc.size());
    if (path.empty()) return "expected ipc://PATH (no path given)";
    if (path.size() > kMaxIpcPath) {
      return "the ipc path is " + std::to_string(path.size()) + " bytes long; at most " +
             std::to_string(kMaxIpcPath) + " fit in a Unix socket address";
    }
    return {};
  }
  if (endpoint.starts_with(kInproc)) {
    if (endpoint.size() == kInproc.size()) return "expected inproc://NAME (no name given)";
    return {};
  }
  return "unsupported transport; expected tcp://HOST:PORT, ipc://PATH or inproc://NAME";
}

}  // namespace ios::net
