// ZeroMQ endpoints as users type them (--bind, --connect), checked before
// any socket sees them: libzmq takes "tcp://host:99999" and binds another
// port instead of failing.
#pragma once

#include <string>
#include <string_view>

namespace ios::net {

enum class EndpointUse { kBind, kConnect };

//! Empty when `endpoint` is one we accept for `use`, otherwise what is wrong
//! with it (one sentence, fit to follow "--bind 'ENDPOINT': "). Accepted:
//! tcp://HOST:PORT with PORT in 1..65535 (HOST and PORT may be '*' when
//! binding: any interface, an ephemeral port; IPv6 hosts in brackets),
//! ipc://PATH (at most 107 bytes, the limit of a Unix socket path) and
//! inproc://NAME. No whitespace or control characters anywhere.
std::string EndpointProblem(std::string_view endpoint, EndpointUse use);

}  // namespace ios::net
