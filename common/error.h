// Error type shared by every ios-farm module.
#pragma once

#include <stdexcept>
#include <string>

namespace ios {

//! An expected failure (bad input, invalid graph, unusable file) with a
//! message that already carries its context (file, node, field). Library code
//! throws it; only main.cc turns it into an exit code.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

}  // namespace ios
