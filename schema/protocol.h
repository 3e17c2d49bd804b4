// The farm's wire protocol: the messages ios-coordinator and ios-worker
// exchange, as plain C++ values. On the wire each message is one ZeroMQ
// frame holding one Cap'n Proto message (schema/farm.capnp); this header
// hides Cap'n Proto entirely.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "common/link_measurement.h"
#include "common/measurement.h"
#include "common/network_spec.h"
#include "common/stage.h"

namespace ios::schema {

//! Carried by every message. A peer speaking another version is refused.
//! 3: activations relu6, hardswish and silu, and max pools rounding up
//! (ceil), which an older worker would refuse as malformed or, for ceil,
//! silently ignore.
//! 4: activations hardsigmoid and leakyrelu.
//! 5: operator kinds of common/op_kinds.h (softmax first), sent by name
//! with their attributes.
//! 6: a query's StageProtocol and warm weights (MeasureSettings), which an
//! older worker would ignore, measuring isolated under an executed key; and
//! a query may time a whole network under a schedule (StageQuery::network),
//! which an older worker would take for an empty stage.
//! 7: a worker announces its devices and their links (Hello::devices,
//! links), and a query may time a link between two of them
//! (StageQuery::link, answered in StageResult::link), which an older
//! worker would take for an empty stage.
//! 8: activations gelu and gelu_tanh.
//! 9: a convolution's extra padding at the bottom and right
//! (Conv.padEndH/padEndW), which an older worker would ignore.
inline constexpr uint32_t kProtocolVersion = 9;
//! Larger frames are dropped unread (ZMQ_MAXMSGSIZE is set to this too).
inline constexpr size_t kMaxMessageBytes = size_t{1} << 20;

//! Worker -> coordinator, first message on every connection.
struct Hello {
  std::string worker_id;  // for logs: host:pid[:gpu]
  DeviceInfo device;      // routing uses device.fingerprint
  //! Free-form device properties (SM count, memory, versions...).
  std::vector<std::pair<std::string, std::string>> properties;
  uint32_t capacity = 1;         // queries the worker accepts in flight
  uint32_t heartbeat_ms = 1000;  // how often the worker sends heartbeats
  std::string software;          // e.g. "ios-worker 0.1.0"
  //! Identical devices of `device`'s class the worker owns: a link query
  //! goes only to a worker with two or more.
  uint32_t devices = 1;
  std::vector<LinkFigures> links;  // between them, as the worker knows them
};

//! Both ways. Any message counts as a sign of life; this one is sent when
//! there is nothing else to say.
struct Heartbeat {
  uint32_t interval_ms = 1000;  // the sender's heartbeat period
};

//! Coordinator -> worker: measure one stage. Self-contained: the worker
//! needs nothing else (no graph, no DB).
struct StageQuery {
  uint64_t query_id = 0;
  int batch_size = 1;
  MeasureSettings settings;  // includes dtype
  StageSpec stage;
  //! How long the coordinator waits for the answer; 0: not said. The worker
  //! bounds the measurement by it (worker/farm_worker.h).
  uint32_t timeout_ms = 0;
  //! When set, the query times this network end to end under its schedule
  //! (devices::Backend::MeasureNetwork) and `stage` is empty. Shared: a
  //! network is large and queries are copied between threads.
  std::shared_ptr<const NetworkSpec> network = nullptr;
  //! When set, the query times copies between two of the worker's devices
  //! (devices::Backend::MeasureLink); `stage` is empty and `network` null.
  std::optional<LinkQuery> link = std::nullopt;

  //! The stage's, the network's or the link's description, for logs.
  std::string Describe() const;
};

//! Worker -> coordinator: the answer to one query (a failure is an answer).
struct StageResult {
  uint64_t query_id = 0;
  MeasureResult result;
  //! A link query's answer when result is ok (its error goes in `result`).
  std::optional<LinkMeasurement> link = std::nullopt;
};

enum class RejectReason {
  kVersionMismatch,  // the peer speaks another protocol version
  kMalformed,        // the message could not be decoded or was invalid
  kUnknownWorker,    // a worker sent something before its hello (say hello)
};
const char* ToString(RejectReason reason);

//! Coordinator -> worker: a message was refused.
struct Reject {
  RejectReason reason = RejectReason::kMalformed;
  std::string message;
};

//! Coordinator -> worker: this coordinator is going away; drop queued work
//! and wait for the next one (workers are long-lived).
struct Shutdown {
  std::string reason;
};

using Message = std::variant<Hello, Heartbeat, StageQuery, StageResult, Reject, Shutdown>;

//! Encodes `message` as one frame with the current protocol version.
std::string Encode(const Message& message);
//! Encodes a stage query without copying the spec (the coordinator's hot path).
std::string EncodeQuery(uint64_t query_id, const StageSpec& stage, int batch_size,
                        const MeasureSettings& settings, uint32_t timeout_ms = 0);
//! Encodes a query that times `network` end to end.
std::string EncodeNetworkQuery(uint64_t query_id, const NetworkSpec& network, int batch_size,
                               const MeasureSettings& settings, uint32_t timeout_ms = 0);
//! Encodes a query that times the link between two of a worker's devices.
std::string EncodeLinkQuery(uint64_t query_id, const LinkQuery& link, uint32_t timeout_ms = 0);
//! Encodes with another version number: for tests of version checks only.
std::string EncodeWithVersion(const Message& message, uint32_t version);

struct DecodeError {
  enum class Kind {
    kOversized,        // larger than kMaxMessageBytes
    kMalformed,        // not a valid Cap'n Proto message, or limits exceeded
    kVersionMismatch,  // `version` != kProtocolVersion
    kInvalid,          // well-formed, but a field is out of range or inconsistent
  };
  Kind kind = Kind::kMalformed;
  std::string message;   // names the field and what was expected
  uint32_t version = 0;  // the peer's version, for kVersionMismatch
  //! A StageQuery's id when it could be read although the query was refused
  //! (e.g. a stage beyond the budgets): the worker answers that id with an
  //! error instead of leaving the coordinator waiting.
  std::optional<uint64_t> query_id;
};
const char* ToString(DecodeError::Kind kind);

//! Decodes one frame. Never throws and never crashes, whatever the bytes:
//! size, traversal and nesting limits are enforced, and a decoded stage is
//! checked for consistency (indices in range, shapes re-inferred), so a
//! backend can build it without further checks.
std::variant<Message, DecodeError> Decode(std::string_view bytes);

}  // namespace ios::schema
