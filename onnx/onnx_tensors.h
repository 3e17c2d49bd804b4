// Internal to the ONNX importer: reading ONNX tensors and node attributes
// into plain values, with errors that name the node and the field.
#pragma once

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/limits.h"

namespace ios::onnx_import::detail {

//! The range an integer read from a file must lie in before it is used as
//! an int, and where the range comes from (for messages).
struct Bounds {
  int64_t low;
  int64_t high;
  const char* source;
};

//! Kernel sizes, strides, dilations, groups, channels, heights and widths.
inline constexpr Bounds kExtentBounds{1, limits::kMaxExtent,
                                      "common/limits.h kMaxExtent, the largest a worker measures"};
inline constexpr Bounds kPaddingBounds{0, limits::kMaxExtent,
                                       "common/limits.h kMaxExtent, the largest a worker measures"};
inline constexpr Bounds kBatchBounds{1, limits::kMaxBatchSize, "common/limits.h kMaxBatchSize"};
//! ONNX's 0/1 attributes (transB, ceil_mode, allowzero, ...).
inline constexpr Bounds kFlagBounds{0, 1, "a flag"};
//! Axes of the rank-4 tensors the importer reads (Flatten's may be 4).
inline constexpr Bounds kAxisBounds{-4, 4, "an axis of a rank-4 tensor"};

//! `value` as an int; throws ios::Error "<where>: <what> is <value>,
//! outside [low, high] (<source>)" when it does not lie in `bounds`. Every
//! integer of a file that becomes an int passes here: a cast alone reads
//! 2^32 + 1 as 1.
int Narrow(int64_t value, const Bounds& bounds, const std::string& where, const std::string& what);

//! Most elements a tensor may have: more than a 2 GiB file holds bytes.
inline constexpr int64_t kMaxTensorElements = int64_t{1} << 31;

//! The product of `dims` (each >= 0); throws ios::Error naming `where` when
//! it exceeds kMaxTensorElements, before it can overflow.
int64_t ElementCount(const std::vector<int64_t>& dims, const std::string& where);

//! Checks the integer attributes this importer reads, and the windows of
//! every convolution and pooling operator, in `graph` and the graphs nested
//! in it, against their Bounds. Runs before ONNX's shape inference, which
//! divides by a zero stride (libonnx 1.12) and computes with the rest.
void CheckAttributesBeforeInference(const ::onnx::GraphProto& graph, const std::string& source);

//! A constant tensor (an initializer, a Constant node's value, or a weight
//! the file declares as a graph input without values).
struct ConstTensor {
  std::string name;
  std::vector<int64_t> dims;
  bool has_values = false;  // false: only the shape is known
  bool is_float = true;     // floats hold the values; otherwise ints do
  std::vector<float> floats;
  std::vector<int64_t> ints;
  bool taken = false;  // floats moved into the one operator reading it (Importer::TakeFloats)

  //! Checked (ElementCount); every tensor's count is checked when read.
  int64_t elements() const;
  //! "[64, 3, 7, 7]".
  std::string DimsText() const;
};

//! Asks the kernel to back the 2 MiB pages wholly inside `bytes` at `data`
//! with huge pages, before they are first written: a weight copy of
//! hundreds of MB otherwise takes a page fault every 4 KiB, which cost as
//! much as the copy (more in a VM). A hint: where refused, nothing changes.
void AdviseHugePages(const void* data, size_t bytes);

//! `n` zeros in memory advised for huge pages before its first write: the
//! one way every weight buffer of the import is made.
template <class T>
std::vector<T> LargeZeros(size_t n) {
  std::vector<T> values;
  values.reserve(n);
  AdviseHugePages(values.data(), n * sizeof(T));
  values.resize(n);
  return values;
}

//! The [cols, rows] transpose of the row-major [rows, cols] matrix `m`,
//! times `scale`: ONNX's [C, K] weights as a convolution's [K, C].
std::vector<float> Transposed(const std::vector<float>& m, int64_t rows, int64_t cols,
                              float scale = 1.0f);

//! The same in `m`'s own memory, through `scratch` (grown as needed and
//! kept for the next call): a model's weights transposed one after another
//! then touch no fresh pages beyond the largest one's, where a new vector
//! each would double the memory the import faults in (ViT-L: 1.2 GB).
std::vector<float> TransposedInPlace(std::vector<float> m, int64_t rows, int64_t cols, float scale,
                                     std::vector<float>& scratch);

//! `m` times `scale`.
std::vector<float> Scaled(std::vector<float> m, float scale);

//! A copy of `m` in huge-page-advised memory (AdviseHugePages): a weight
//! the IR keeps beside the file's constant.
std::vector<float> Copied(const std::vector<float>& m);

//! "[1, 2, 3]": a list of integers (dims, axes, perms) for messages.
std::string IntsText(const std::vector<int64_t>& values);

//! The values of `tensor` (FLOAT, or INT64/INT32 read as integers).
//! Throws ios::Error naming `where` for other element types, external data
//! or a size that disagrees with the dims.
//! `raw`, when given, stands for the tensor's raw_data (cut out of the
//! model before parsing: onnx_wire.h; or its external data:
//! onnx_external.h).
ConstTensor ReadTensor(const ::onnx::TensorProto& tensor, const std::string& where,
                       std::optional<std::string_view> raw = std::nullopt);

//! A node's attributes by name, with typed getters that name the node and
//! the attribute when the type is wrong.
class Attributes {
 public:
  Attributes(const ::onnx::NodeProto& node, std::string where);

  bool Has(const std::string& name) const;
  int64_t Int(const std::string& name, int64_t fallback) const;
  float Float(const std::string& name, float fallback) const;
  std::string String(const std::string& name, const std::string& fallback) const;
  std::vector<int64_t> Ints(const std::string& name) const;  // empty when absent
  //! Int and Ints narrowed to int within `bounds` (Narrow), naming the
  //! attribute; the fallback is not checked.
  int Int(const std::string& name, int fallback, const Bounds& bounds) const;
  std::vector<int> Ints(const std::string& name, const Bounds& bounds) const;
  std::optional<::onnx::TensorProto> Tensor(const std::string& name) const;
  //! Refuses any attribute not in `known`, naming it.
  void OnlyKnown(const std::vector<std::string>& known) const;

 private:
  const ::onnx::AttributeProto* Find(const std::string& name,
                                     ::onnx::AttributeProto_AttributeType type) const;

  const ::onnx::NodeProto& node_;
  std::string where_;
};

}  // namespace ios::onnx_import::detail
