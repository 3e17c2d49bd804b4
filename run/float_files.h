// The raw float32 files ios-run reads (--input, --expect): the format
// scripts/export-torchvision.py and scripts/onnxruntime_reference.js write,
// little-endian values without a header, in the model file's own order.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "common/graph.h"

namespace ios::run {

//! A raw little-endian float32 file of exactly `count` values; `option`
//! ("--input") and `shape` ("1x3x224x224") word the messages. Throws
//! ios::Error naming the file, its count and the count expected.
std::vector<float> ReadFloats(const std::string& path, const std::string& option, size_t count,
                              const std::string& shape);

//! Samples of `s` stored N,H,W,C reordered N,C,H,W: the order the graph's
//! input has, for an ONNX model whose own input is N,H,W,C.
std::vector<float> ChannelsFirst(const std::vector<float>& nhwc, const Shape& s);

}  // namespace ios::run
