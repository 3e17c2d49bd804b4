// The ZeroMQ context every farm socket lives in. inproc:// endpoints work
// only within one context, so the embedded farm shares one between the
// coordinator and its local workers; CURVE's ZAP handler is per context.
#pragma once

#include <memory>

namespace zmq {
class context_t;
}

namespace ios::net {

//! Owns one ZeroMQ context. Thread-safe (ZeroMQ contexts are); sockets made
//! from it must be closed before it is destroyed.
class Context {
 public:
  Context();
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  zmq::context_t& zmq() { return *context_; }

 private:
  std::unique_ptr<zmq::context_t> context_;
};

}  // namespace ios::net
