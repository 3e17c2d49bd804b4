// Internal to the ONNX importer: an ONNX file's weights kept out of
// protobuf. Parsing a model copies every initializer's raw_data into a
// string of its own: for a 346 MB ViT that copy and its page faults were
// a third of the import. The file's bytes are walked in protobuf's wire
// format instead, and the large raw_data fields are cut out of the bytes
// protobuf, the checker and shape inference see; the importer reads them
// straight from the file (mapped: common/input_file.h).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ios::onnx_import::detail {

//! raw_data fields of at least this many bytes are cut out: weights. Shape
//! and index tensors, which shape inference reads, are far smaller.
inline constexpr size_t kSplitRawDataBytes = size_t{64} << 10;

//! A model's bytes with its large raw_data cut out, and those raw_data.
struct SplitModel {
  //! The model for protobuf: each cut raw_data replaced by one zero byte
  //! (the checker wants a tensor's values present; it does not compare
  //! their size with the dims, which ReadTensor does against `raw`).
  //! Empty when nothing was cut: parse the original bytes.
  std::string skeleton;
  //! By initializer, in the order protobuf lists them (graphs merged): the
  //! view of its raw_data in the original bytes, or nullopt where the
  //! skeleton holds the values.
  std::vector<std::optional<std::string_view>> raw;
};

//! Cuts the raw_data of `min_bytes` or more out of the graph initializers
//! of ModelProto `bytes`. Bytes that are not a well-formed protobuf are
//! left whole (skeleton empty): protobuf's parse then says what is wrong.
SplitModel SplitOutWeights(std::string_view bytes, size_t min_bytes = kSplitRawDataBytes);

}  // namespace ios::onnx_import::detail
