// Internal to schema/: the budgets a decoded message must respect and the
// checks that give Decode its guarantee (a decoded stage can be built by a
// backend without further checks). Not part of the module's interface.
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>

#include "schema/protocol.h"

namespace ios::schema::detail {

// Budgets. Reading enforces the structural ones (list lengths, chain depth)
// before it allocates, so one frame costs the receiver work and memory in
// proportion to its size; real stages stay far below all of them.
inline constexpr size_t kMaxTextBytes = 4096;
inline constexpr size_t kMaxProperties = 256;
inline constexpr size_t kMaxGroups = 64;
inline constexpr size_t kMaxOpsPerGroup = 64;
inline constexpr size_t kMaxExternals = 1024;
inline constexpr size_t kMaxTerms = 1024;      // per op input
inline constexpr size_t kMaxSlices = 1024;     // per term
inline constexpr size_t kMaxChainLength = 64;  // steps of one sequential op
inline constexpr size_t kMaxChainDepth = 8;    // chains inside chains
inline constexpr int kMaxExtent = 1 << 16;     // channels, height, width, window sizes
inline constexpr int kMaxBatchSize = 1 << 20;
inline constexpr int kMaxRuns = 1000;  // warmup, number, repeat
inline constexpr uint32_t kMaxCapacity = 1024;
inline constexpr uint32_t kMinHeartbeatMs = 10, kMaxHeartbeatMs = 600000;

//! A well-formed message with a field out of range or inconsistent. The text
//! starts with the field's path from the message root, e.g.
//! "query.stage.groups[1].ops[0].inputs[0][1].index: 7 out of range (3 externals)".
class InvalidField : public std::runtime_error {
 public:
  explicit InvalidField(const std::string& message) : std::runtime_error(message) {}
};

//! Checks every value of a message just read: ranges, indices, shapes
//! re-inferred from the inputs, the merge rule. Requires what reading
//! guarantees (known enum values, structural budgets). Throws InvalidField.
void Validate(const Message& message);

}  // namespace ios::schema::detail
