// Endpoint checks for --bind and --connect: what libzmq would take and then
// misread (a port beyond 65535 binds another port) is refused, saying why.
#include "net/endpoint.h"

#include <gtest/gtest.h>

#include <string>

namespace ios::net {
namespace {

struct EndpointCase {
  const char* endpoint;
  EndpointUse use;
  const char* problem;  // "" when accepted; otherwise a part of the message
};

constexpr EndpointUse kBind = EndpointUse::kBind, kConnect = EndpointUse::kConnect;

const EndpointCase kCases[] = {
    {"tcp://*:5555", kBind, ""},
    {"tcp://127.0.0.1:*", kBind, ""},
    {"tcp://127.0.0.1:1", kBind, ""},
    {"tcp://127.0.0.1:65535", kBind, ""},
    {"tcp://eth0:5555", kBind, ""},
    {"tcp://[::1]:5555", kBind, ""},
    {"tcp://host.example:5555", kConnect, ""},
    {"tcp://[fe80::1]:5555", kConnect, ""},
    {"ipc:///tmp/ios-farm.sock", kBind, ""},
    {"inproc://farm", kConnect, ""},
    {"tcp://127.0.0.1:99999", kBind, "port 99999 is out of range: ports go from 1 to 65535"},
    {"tcp://127.0.0.1:65536", kConnect, "port 65536 is out of range"},
    {"tcp://127.0.0.1:0", kBind, "port 0 is out of range"},
    {"tcp://127.0.0.1:99999999999999999999", kBind, "is out of range"},
    {"tcp://127.0.0.1:-1", kBind, "port '-1' is not a number"},
    {"tcp://127.0.0.1:http", kConnect, "port 'http' is not a number"},
    {"tcp://127.0.0.1:", kBind, "port '' is not a number"},
    {"tcp://127.0.0.1", kBind, "no port given"},
    {"tcp://[::1]", kConnect, "no port given"},
    {"tcp://:5555", kBind, "no host given"},
    {"tcp://", kConnect, "nothing after tcp://"},
    {"tcp://[::1:5555", kConnect, "closing ']'"},
    {"tcp://*:5555", kConnect, "'*' (any interface) is for --bind"},
    {"tcp://host:*", kConnect, "port '*' (an ephemeral port) is for --bind"},
    {"tcp://a;b:5555", kConnect, "source address"},
    {"tcp://host :5555", kConnect, "whitespace"},
    {"ipc://", kBind, "no path given"},
    {"inproc://", kBind, "no name given"},
    {"udp://host:5555", kConnect, "unsupported transport"},
    {"host:5555", kConnect, "unsupported transport"},
    {"", kBind, "empty"},
};

TEST(EndpointTest, AcceptsWhatZeroMqBindsAsWrittenAndRefusesTheRestSayingWhy) {
  for (const EndpointCase& c : kCases) {
    const std::string problem = EndpointProblem(c.endpoint, c.use);
    const char* use = c.use == kBind ? "bind" : "connect";
    if (std::string(c.problem).empty()) {
      EXPECT_EQ(problem, "") << use << " " << c.endpoint;
    } else {
      EXPECT_NE(problem.find(c.problem), std::string::npos)
          << use << " " << c.endpoint << ": got '" << problem << "'";
    }
  }
}

TEST(EndpointTest, IpcPathsLongerThanAUnixSocketAddressAreRefused) {
  EXPECT_EQ(EndpointProblem("ipc://" + std::string(107, 'p'), kBind), "");
  EXPECT_NE(EndpointProblem("ipc://" + std::string(108, 'p'), kBind).find("108 bytes long"),
            std::string::npos);
}

}  // namespace
}  // namespace ios::net
