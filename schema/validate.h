// Internal to schema/: the budgets a decoded message must respect and the
// checks that give Decode its guarantee (a decoded stage can be built by a
// backend without further checks). Not part of the module's interface.
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>

#include "common/limits.h"
#include "schema/protocol.h"

namespace ios::schema::detail {

// Budgets. Reading enforces the structural ones (list lengths, chain depth)
// before it allocates, so one frame costs the receiver work and memory in
// proportion to its size; real stages stay far below all of them. What a
// worker can measure is defined once in common/limits.h (the model loader
// refuses beyond it too); the rest bounds the wire format only.
using ios::limits::kMaxBatchSize;
using ios::limits::kMaxChainDepth;
using ios::limits::kMaxChainLength;
using ios::limits::kMaxExtent;
using ios::limits::kMaxExternals;
using ios::limits::kMaxGroups;
using ios::limits::kMaxOpsPerGroup;
using ios::limits::kMaxSlices;
using ios::limits::kMaxTerms;
inline constexpr size_t kMaxTextBytes = 4096;
inline constexpr size_t kMaxProperties = 256;
inline constexpr size_t kMaxLinks = 64;        // hello.links
inline constexpr uint32_t kMaxDevices = 1024;  // hello.devices
inline constexpr int kMaxRuns = 1000;          // warmup, number, repeat
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
