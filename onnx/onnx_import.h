// ONNX import: a model file exported from PyTorch (or another exporter)
// becomes a Graph with its blocks and the weights of its convolutions.
//
// Operators are mapped onto the IR, rewriting what has an exact equivalent:
// BatchNormalization after a convolution is folded into its weights, a Relu
// into the convolution before it, a zero Pad into the padding of the
// convolution or average pool after it, Concat on channels into the terms
// of its readers, Flatten + Gemm/MatMul into a convolution whose kernel
// covers the whole feature map, Dropout and Identity removed. Everything
// else is refused with one line naming the node, its operator and what is
// missing: never a crash and never a graph that computes something else.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/graph.h"
#include "exec/weights.h"

namespace ios::onnx_import {

//! One output of the ONNX graph: ios-run's output holds every output's
//! values in turn, each sample's together.
struct ModelOutput {
  std::string name;
  std::vector<int64_t> dims;   // as the file declares them, the batch first
  int64_t values = 0;          // per sample
  bool channels_last = false;  // its values in (H, W, C) order, as the file has them
};

struct ImportedModel {
  Graph graph;  // shapes inferred, single-entry single-exit blocks found
  //! The file's weights, one entry per convolution; empty when the file
  //! carries none (an export with export_params=False).
  exec::WeightStore weights;
  bool has_weights = false;
  int batch = 1;  // the batch size the file declares (1 when symbolic)
  //! The file's input is N,H,W,C (TensorFlow's order) and the graph's first
  //! operators transpose it: the graph's input is that N,C,H,W map, and an
  //! input file for the model is read as N,H,W,C.
  bool input_channels_last = false;
  //! The graph's outputs in order; with more than one (or one in another
  //! order than N, C, H, W) the graph ends in their concatenation, one
  //! vector per sample.
  std::vector<ModelOutput> outputs;
  std::vector<std::string> notes;     // rewrites made: folds, fusions, removals
  std::vector<std::string> warnings;  // checker complaints that were not fatal
};

//! True for a path ending in ".onnx" (any case).
bool IsOnnxPath(std::string_view path);

//! Largest ONNX file read (2 GiB, protobuf's own limit).
inline constexpr std::uintmax_t kMaxOnnxFileBytes = std::uintmax_t{2} << 30;

//! Reads and imports an ONNX file, and the files of its external data
//! (weights kept beside it: located relative to its directory). Throws
//! ios::Error naming the file and, where one is at fault, the node, its
//! operator and the attribute.
ImportedModel ImportOnnxFile(const std::string& path);

//! Imports a serialized ModelProto (without external data); `source` names
//! it in messages and, its stem, the graph when the model has no name.
ImportedModel ImportOnnx(std::string_view bytes, const std::string& source);

}  // namespace ios::onnx_import
