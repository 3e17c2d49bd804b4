#include "onnx/onnx_tensors.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <set>

#include "common/error.h"
#include "common/printable.h"

namespace ios::onnx_import::detail {

int Narrow(int64_t value, const Bounds& bounds, const std::string& where, const std::string& what) {
  if (value < bounds.low || value > bounds.high) {
    throw Error(where + ": " + what + " is " + std::to_string(value) + ", outside [" +
                std::to_string(bounds.low) + ", " + std::to_string(bounds.high) + "] (" +
                bounds.source + ")");
  }
  return static_cast<int>(value);
}

int64_t ElementCount(const std::vector<int64_t>& dims, const std::string& where) {
  int64_t count = 1;
  for (int64_t d : dims) {
    if (d < 0) throw Error(where + ": negative dimension " + std::to_string(d));
    // Zero elements end the product; otherwise count <= limit / d keeps
    // count * d within the limit, so nothing overflows on the way.
    if (d != 0 && count > kMaxTensorElements / d) {
      throw Error(where + ": dims " + IntsText(dims) + " make more than " +
                  std::to_string(kMaxTensorElements) +
                  " elements (more than a 2 GiB ONNX file holds)");
    }
    count *= d;
  }
  return count;
}

int64_t ConstTensor::elements() const { return ElementCount(dims, "tensor " + Quoted(name)); }

std::string IntsText(const std::vector<int64_t>& values) {
  std::string text = "[";
  for (size_t i = 0; i < values.size(); ++i) text += (i ? ", " : "") + std::to_string(values[i]);
  return text + "]";
}

std::string ConstTensor::DimsText() const { return IntsText(dims); }

namespace {

//! Copies `count` little-endian values of type T out of raw bytes.
template <class T>
std::vector<T> FromRaw(std::string_view raw, int64_t count, const std::string& where) {
  if (raw.size() != static_cast<size_t>(count) * sizeof(T)) {
    throw Error(where + ": its data holds " + std::to_string(raw.size()) + " bytes, " +
                std::to_string(count * static_cast<int64_t>(sizeof(T))) + " expected");
  }
  // Zero-filled, then copied whole: both passes run at memset/memcpy speed,
  // where one pass copying value by value (the bytes need not be aligned)
  // was slower than the two.
  std::vector<T> values = LargeZeros<T>(static_cast<size_t>(count));
  if (!raw.empty()) std::memcpy(values.data(), raw.data(), raw.size());
  return values;
}

template <class T, class Field>
std::vector<T> FromField(const Field& field, int64_t count, const std::string& where) {
  if (field.size() != count) {
    throw Error(where + ": holds " + std::to_string(field.size()) + " values, its dims say " +
                std::to_string(count));
  }
  return std::vector<T>(field.begin(), field.end());
}

}  // namespace

void AdviseHugePages(const void* data, size_t bytes) {
  constexpr uintptr_t kHugePage = uintptr_t{2} << 20;
  const auto start = reinterpret_cast<uintptr_t>(data);
  const uintptr_t begin = (start + kHugePage - 1) & ~(kHugePage - 1);
  const uintptr_t end = (start + bytes) & ~(kHugePage - 1);
  if (end > begin) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
}

namespace {

//! out = scale * in^T for the row-major [rows, cols] `in`, in tiles of 16 x
//! 16 (a cache line of each of 16 rows), each written column by column:
//! reading a column whole touches a cache line (on a large matrix, a page)
//! per value; larger tiles thrash the L1 cache, its rows being a
//! power-of-two stride apart. 2x the column-wise copy on a ViT-L weight.
void TransposeTiles(const float* in, float* out, size_t rows, size_t cols, float scale) {
  constexpr size_t kTile = 16;
  for (size_t i0 = 0; i0 < rows; i0 += kTile) {
    for (size_t o0 = 0; o0 < cols; o0 += kTile) {
      const size_t i_end = std::min(i0 + kTile, rows), o_end = std::min(o0 + kTile, cols);
      for (size_t o = o0; o < o_end; ++o) {
        for (size_t i = i0; i < i_end; ++i) out[o * rows + i] = scale * in[i * cols + o];
      }
    }
  }
}

}  // namespace

std::vector<float> Transposed(const std::vector<float>& m, int64_t rows, int64_t cols,
                              float scale) {
  const auto r = static_cast<size_t>(rows), c = static_cast<size_t>(cols);
  std::vector<float> out = LargeZeros<float>(r * c);
  TransposeTiles(m.data(), out.data(), r, c, scale);
  return out;
}

std::vector<float> TransposedInPlace(std::vector<float> m, int64_t rows, int64_t cols, float scale,
                                     std::vector<float>& scratch) {
  const auto r = static_cast<size_t>(rows), c = static_cast<size_t>(cols);
  if (scratch.size() < r * c) scratch.resize(r * c);
  TransposeTiles(m.data(), scratch.data(), r, c, scale);
  std::copy(scratch.begin(), scratch.begin() + static_cast<std::ptrdiff_t>(r * c), m.begin());
  return m;
}

std::vector<float> Copied(const std::vector<float>& m) {
  std::vector<float> out = LargeZeros<float>(m.size());
  std::copy(m.begin(), m.end(), out.begin());
  return out;
}

std::vector<float> Scaled(std::vector<float> m, float scale) {
  if (scale != 1.0f) {
    for (float& v : m) v *= scale;
  }
  return m;
}

ConstTensor ReadTensor(const ::onnx::TensorProto& tensor, const std::string& where,
                       std::optional<std::string_view> raw) {
  ConstTensor out;
  out.name = tensor.name();
  out.dims.assign(tensor.dims().begin(), tensor.dims().end());
  const int64_t count = ElementCount(out.dims, where);
  if (tensor.data_location() == ::onnx::TensorProto_DataLocation_EXTERNAL && !raw) {
    throw Error(where +
                ": its values are in an external file, which this importer does not read "
                "(export with the weights inside the model)");
  }
  out.has_values = true;
  const bool has_raw = raw.has_value() || tensor.has_raw_data();
  if (!raw && has_raw) raw = tensor.raw_data();
  switch (tensor.data_type()) {
    case ::onnx::TensorProto_DataType_FLOAT:
      out.floats = has_raw ? FromRaw<float>(*raw, count, where)
                           : FromField<float>(tensor.float_data(), count, where);
      return out;
    case ::onnx::TensorProto_DataType_INT64:
      out.is_float = false;
      out.ints = has_raw ? FromRaw<int64_t>(*raw, count, where)
                         : FromField<int64_t>(tensor.int64_data(), count, where);
      return out;
    case ::onnx::TensorProto_DataType_INT32: {
      out.is_float = false;
      const std::vector<int32_t> narrow =
          has_raw ? FromRaw<int32_t>(*raw, count, where)
                  : FromField<int32_t>(tensor.int32_data(), count, where);
      out.ints.assign(narrow.begin(), narrow.end());
      return out;
    }
    case ::onnx::TensorProto_DataType_BOOL: {
      // A Dropout's training_mode, a mask's condition: one byte each, 0 or 1.
      out.is_float = false;
      const std::vector<uint8_t> bytes =
          has_raw ? FromRaw<uint8_t>(*raw, count, where) : std::vector<uint8_t>{};
      if (!has_raw) {
        const std::vector<int32_t> wide = FromField<int32_t>(tensor.int32_data(), count, where);
        for (int32_t v : wide) out.ints.push_back(v != 0 ? 1 : 0);
      }
      for (uint8_t v : bytes) out.ints.push_back(v != 0 ? 1 : 0);
      return out;
    }
    default:
      throw Error(where + ": element type " + std::to_string(tensor.data_type()) +
                  " (only FLOAT, INT64, INT32 and BOOL tensors are read)");
  }
}

Attributes::Attributes(const ::onnx::NodeProto& node, std::string where)
    : node_(node), where_(std::move(where)) {}

bool Attributes::Has(const std::string& name) const {
  for (const auto& a : node_.attribute()) {
    if (a.name() == name) return true;
  }
  return false;
}

const ::onnx::AttributeProto* Attributes::Find(const std::string& name,
                                               ::onnx::AttributeProto_AttributeType type) const {
  for (const auto& a : node_.attribute()) {
    if (a.name() != name) continue;
    // Old exporters leave the type unset; then trust the field asked for.
    if (a.type() != type && a.type() != ::onnx::AttributeProto_AttributeType_UNDEFINED) {
      throw Error(where_ + ": attribute " + Quoted(name) + " has type " +
                  ::onnx::AttributeProto_AttributeType_Name(a.type()) + ", expected " +
                  ::onnx::AttributeProto_AttributeType_Name(type));
    }
    return &a;
  }
  return nullptr;
}

int64_t Attributes::Int(const std::string& name, int64_t fallback) const {
  const auto* a = Find(name, ::onnx::AttributeProto_AttributeType_INT);
  return a ? a->i() : fallback;
}

float Attributes::Float(const std::string& name, float fallback) const {
  const auto* a = Find(name, ::onnx::AttributeProto_AttributeType_FLOAT);
  return a ? a->f() : fallback;
}

std::string Attributes::String(const std::string& name, const std::string& fallback) const {
  const auto* a = Find(name, ::onnx::AttributeProto_AttributeType_STRING);
  return a ? a->s() : fallback;
}

std::vector<int64_t> Attributes::Ints(const std::string& name) const {
  const auto* a = Find(name, ::onnx::AttributeProto_AttributeType_INTS);
  if (a == nullptr) return {};
  return {a->ints().begin(), a->ints().end()};
}

int Attributes::Int(const std::string& name, int fallback, const Bounds& bounds) const {
  const auto* a = Find(name, ::onnx::AttributeProto_AttributeType_INT);
  return a ? Narrow(a->i(), bounds, where_, "attribute " + Quoted(name)) : fallback;
}

std::vector<int> Attributes::Ints(const std::string& name, const Bounds& bounds) const {
  std::vector<int> values;
  for (int64_t v : Ints(name))
    values.push_back(Narrow(v, bounds, where_, "attribute " + Quoted(name)));
  return values;
}

std::optional<::onnx::TensorProto> Attributes::Tensor(const std::string& name) const {
  const auto* a = Find(name, ::onnx::AttributeProto_AttributeType_TENSOR);
  if (a == nullptr) return std::nullopt;
  return a->t();
}

void Attributes::OnlyKnown(const std::vector<std::string>& known) const {
  for (const auto& a : node_.attribute()) {
    bool listed = false;
    for (const std::string& k : known) listed |= a.name() == k;
    if (!listed) {
      throw Error(where_ + ": attribute " + Quoted(a.name()) +
                  " is not one this importer knows for the operator, so it cannot honour it");
    }
  }
}

namespace {

// Convolutions and pools: ONNX infers their shapes with one helper that
// divides by the stride.
const std::set<std::string>& WindowOperators() {
  static const std::set<std::string> ops = {"AveragePool",   "Conv",       "ConvInteger",
                                            "ConvTranspose", "DeformConv", "LpPool",
                                            "MaxPool",       "MaxUnpool",  "QLinearConv"};
  return ops;
}

//! The bounds of an integer attribute, or null for one left to the
//! importer's own checks (or to no one: an operator it refuses anyway).
const Bounds* AttributeBounds(const std::string& op, const std::string& name) {
  if (WindowOperators().count(op)) {
    if (name == "kernel_shape" || name == "strides" || name == "dilations" || name == "group") {
      return &kExtentBounds;
    }
    if (name == "pads") return &kPaddingBounds;
  }
  if (op == "Pad" && name == "pads") return &kPaddingBounds;
  if (name == "axis" &&
      (op == "Concat" || op == "Flatten" || op == "Softmax" || op == "LogSoftmax")) {
    return &kAxisBounds;
  }
  if (name == "axes" && (op == "ReduceMean" || op == "ReduceMax")) return &kAxisBounds;
  static const std::set<std::string> flags = {"allowzero",    "ceil_mode", "count_include_pad",
                                              "keepdims",     "transA",    "transB",
                                              "training_mode"};
  return flags.count(name) ? &kFlagBounds : nullptr;
}

}  // namespace

void CheckAttributesBeforeInference(const ::onnx::GraphProto& graph, const std::string& source) {
  for (int i = 0; i < graph.node_size(); ++i) {
    const ::onnx::NodeProto& node = graph.node(i);
    const std::string label =
        node.name().empty() ? node.op_type() + "_" + std::to_string(i) : node.name();
    const std::string where = source + ": node " + Quoted(label) + " (" + node.op_type() + ")";
    const bool default_domain = node.domain().empty() || node.domain() == "ai.onnx";
    for (const ::onnx::AttributeProto& a : node.attribute()) {
      if (a.has_g()) CheckAttributesBeforeInference(a.g(), source);
      for (const ::onnx::GraphProto& g : a.graphs()) CheckAttributesBeforeInference(g, source);
      const Bounds* bounds = default_domain ? AttributeBounds(node.op_type(), a.name()) : nullptr;
      if (bounds == nullptr) continue;
      const std::string what = "attribute " + Quoted(a.name());
      if (a.has_i()) Narrow(a.i(), *bounds, where, what);
      for (int64_t v : a.ints()) Narrow(v, *bounds, where, what);
    }
  }
}

}  // namespace ios::onnx_import::detail
