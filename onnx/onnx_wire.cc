#include "onnx/onnx_wire.h"

#include <cstdint>

namespace ios::onnx_import::detail {
namespace {

// Field numbers of onnx.proto on the path to a weight's bytes.
constexpr uint64_t kModelGraph = 7;        // ModelProto.graph
constexpr uint64_t kGraphInitializer = 5;  // GraphProto.initializer
constexpr uint64_t kTensorRawData = 9;     // TensorProto.raw_data
constexpr int kLengthDelimited = 2;        // the wire type of messages and bytes

//! One field of a message: its number, wire type, its bytes whole and,
//! for a length-delimited field, its payload.
struct Field {
  uint64_t number = 0;
  int wire_type = 0;
  std::string_view whole;
  std::string_view payload;
};

bool ReadVarint(std::string_view& rest, uint64_t& value) {
  value = 0;
  for (int shift = 0; shift < 64 && !rest.empty(); shift += 7) {
    const auto byte = static_cast<uint8_t>(rest.front());
    rest.remove_prefix(1);
    value |= uint64_t{byte & 0x7fu} << shift;
    if ((byte & 0x80u) == 0) return true;
  }
  return false;
}

//! Takes the next field off `message`; false at a malformed one.
bool NextField(std::string_view& message, Field& field) {
  std::string_view rest = message;
  uint64_t tag = 0;
  if (!ReadVarint(rest, tag)) return false;
  field.number = tag >> 3;
  field.wire_type = static_cast<int>(tag & 7);
  field.payload = {};
  uint64_t skip = 0;
  switch (field.wire_type) {
    case 0:
      if (!ReadVarint(rest, skip)) return false;
      skip = 0;
      break;
    case 1:
      skip = 8;
      break;
    case 5:
      skip = 4;
      break;
    case kLengthDelimited:
      if (!ReadVarint(rest, skip) || skip > rest.size()) return false;
      field.payload = rest.substr(0, skip);
      break;
    default:
      return false;  // groups: not in ONNX
  }
  if (skip > rest.size()) return false;
  rest.remove_prefix(skip);
  field.whole = message.substr(0, message.size() - rest.size());
  message = rest;
  return true;
}

void PutVarint(std::string& out, uint64_t value) {
  while (value >= 0x80) {
    out.push_back(static_cast<char>((value & 0x7f) | 0x80));
    value >>= 7;
  }
  out.push_back(static_cast<char>(value));
}

void PutMessage(std::string& out, uint64_t number, std::string_view payload) {
  PutVarint(out, number << 3 | kLengthDelimited);
  PutVarint(out, payload.size());
  out.append(payload);
}

//! TensorProto `tensor` into `out` with a large raw_data cut into `raw`
//! (protobuf keeps the last of a repeated singular field: so does this).
bool SplitTensor(std::string_view tensor, size_t min_bytes, std::string& out,
                 std::optional<std::string_view>& raw) {
  raw.reset();
  Field field;
  while (!tensor.empty()) {
    if (!NextField(tensor, field)) return false;
    const bool is_raw = field.number == kTensorRawData && field.wire_type == kLengthDelimited;
    if (is_raw && field.payload.size() >= min_bytes) {
      PutMessage(out, kTensorRawData, std::string_view("\0", 1));
      raw = field.payload;
    } else {
      if (is_raw) raw.reset();
      out.append(field.whole);
    }
  }
  return true;
}

bool SplitGraph(std::string_view graph, size_t min_bytes, std::string& out, SplitModel& split) {
  Field field;
  std::string tensor;
  while (!graph.empty()) {
    if (!NextField(graph, field)) return false;
    if (field.number != kGraphInitializer || field.wire_type != kLengthDelimited) {
      out.append(field.whole);
      continue;
    }
    tensor.clear();
    std::optional<std::string_view> raw;
    if (!SplitTensor(field.payload, min_bytes, tensor, raw)) return false;
    PutMessage(out, kGraphInitializer, tensor);
    split.raw.push_back(raw);
  }
  return true;
}

}  // namespace

SplitModel SplitOutWeights(std::string_view bytes, size_t min_bytes) {
  SplitModel split;
  std::string graph;
  Field field;
  while (!bytes.empty()) {
    if (!NextField(bytes, field)) return {};
    if (field.number != kModelGraph || field.wire_type != kLengthDelimited) {
      split.skeleton.append(field.whole);
      continue;
    }
    graph.clear();
    if (!SplitGraph(field.payload, min_bytes, graph, split)) return {};
    PutMessage(split.skeleton, kModelGraph, graph);
  }
  bool cut = false;
  for (const auto& raw : split.raw) cut = cut || raw.has_value();
  if (!cut) return {};
  return split;
}

}  // namespace ios::onnx_import::detail
