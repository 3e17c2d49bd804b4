// Where a model comes from on a command line, ONNX included: a zoo name, an
// IOS JSON graph file or an ONNX file (by its .onnx suffix).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/model_source.h"
#include "exec/weights.h"
#include "onnx/onnx_import.h"

namespace ios {

struct ModelWithWeights {
  LoadedModel model;
  //! The weights the file carries (ONNX exports with parameters); absent
  //! for zoo models, IOS JSON files and ONNX files without values.
  std::optional<exec::WeightStore> weights;
  std::vector<std::string> notes;     // the importer's rewrites
  std::vector<std::string> warnings;  // not fatal, worth a log line
  //! ONNX only: the model's input is N,H,W,C, so an input file for it is
  //! read in that order (ImportedModel::input_channels_last).
  bool input_channels_last = false;
  //! ONNX only: the graph's outputs, whose values the network's output
  //! holds in turn (ImportedModel::outputs); empty for other models.
  std::vector<onnx_import::ModelOutput> outputs{};
};

//! LoadModel (common/model_source.h), or ImportOnnxFile for a path ending
//! in .onnx. Throws ios::Error as they do.
ModelWithWeights LoadAnyModel(const std::string& model);

}  // namespace ios
