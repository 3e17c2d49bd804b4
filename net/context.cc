#include "net/context.h"

#include <zmq.hpp>

namespace ios::net {

Context::Context() : context_(std::make_unique<zmq::context_t>()) {}

Context::~Context() = default;

}  // namespace ios::net
