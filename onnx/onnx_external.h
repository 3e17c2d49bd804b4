// Internal to the ONNX importer: weights kept outside the model file (ONNX
// "external data": an initializer whose data_location is EXTERNAL names a
// file beside the model, an offset and a length). Exporters write them for
// models over protobuf's 2 GiB (vit_h_14, regnet_y_128gf) or on request.
// Each file is mapped once (common/input_file.h) and the tensors are read
// straight from the mapping, like the large raw_data of onnx_wire.h.
#pragma once

#include <onnx/onnx_pb.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/input_file.h"

namespace ios::onnx_import::detail {

class ExternalData {
 public:
  //! `model_dir`: the directory of the model file the locations are
  //! relative to; nullopt for a model read from memory, which then may
  //! not have external data.
  explicit ExternalData(std::optional<std::string> model_dir) : dir_(std::move(model_dir)) {}

  //! The bytes of `tensor`, whose data_location is EXTERNAL. Throws
  //! ios::Error naming `where` and the field at fault: no location, a
  //! location that is absolute or leaves the model's directory, an offset
  //! or length that is not a number or reaches past the file's end.
  std::string_view Bytes(const ::onnx::TensorProto& tensor, const std::string& where);

  //! The bytes of each external initializer of `model` into `raw` (by
  //! initializer; grown to their count), and the initializer left as
  //! SplitOutWeights leaves a cut one (onnx_wire.h), so that the checker
  //! and shape inference need not find the files. `source` names the model.
  void TakeInitializers(::onnx::ModelProto& model, const std::string& source,
                        std::vector<std::optional<std::string_view>>& raw);

 private:
  const MappedInputFile& File(const std::string& location, const std::string& where);

  std::optional<std::string> dir_;
  std::map<std::string, std::unique_ptr<MappedInputFile>> files_;  // by location
};

}  // namespace ios::onnx_import::detail
