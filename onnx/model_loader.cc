#include "onnx/model_loader.h"

#include <utility>

#include "onnx/onnx_import.h"

namespace ios {

ModelWithWeights LoadAnyModel(const std::string& model) {
  if (!onnx_import::IsOnnxPath(model)) return {LoadModel(model), std::nullopt, {}, {}};
  onnx_import::ImportedModel imported = onnx_import::ImportOnnxFile(model);
  ModelWithWeights loaded;
  loaded.model.name = imported.graph.name;
  loaded.model.graph = std::move(imported.graph);
  if (imported.has_weights) loaded.weights = std::move(imported.weights);
  loaded.notes = std::move(imported.notes);
  loaded.warnings = std::move(imported.warnings);
  loaded.input_channels_last = imported.input_channels_last;
  loaded.outputs = std::move(imported.outputs);
  return loaded;
}

}  // namespace ios
