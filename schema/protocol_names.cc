// The protocol's enums by name and its queries described, for messages and
// logs.
#include "schema/protocol.h"

namespace ios::schema {

const char* ToString(RejectReason reason) {
  switch (reason) {
    case RejectReason::kVersionMismatch:
      return "version_mismatch";
    case RejectReason::kMalformed:
      return "malformed";
    case RejectReason::kUnknownWorker:
      return "unknown_worker";
  }
  return "?";
}

const char* ToString(DecodeError::Kind kind) {
  switch (kind) {
    case DecodeError::Kind::kOversized:
      return "oversized";
    case DecodeError::Kind::kMalformed:
      return "malformed";
    case DecodeError::Kind::kVersionMismatch:
      return "version_mismatch";
    case DecodeError::Kind::kInvalid:
      return "invalid";
  }
  return "?";
}

std::string StageQuery::Describe() const {
  if (link) return "link (" + std::to_string(link->bytes.size()) + " sizes)";
  return network != nullptr ? network->Describe() : stage.Describe();
}

}  // namespace ios::schema
