#include "run/run_outputs.h"

#include <cstdint>

namespace ios::run {

std::string OutputsText(const std::vector<onnx_import::ModelOutput>& outputs) {
  std::string text;
  for (const onnx_import::ModelOutput& o : outputs) {
    std::string dims;
    for (int64_t d : o.dims) dims += (dims.empty() ? "" : ",") + (d < 0 ? "N" : std::to_string(d));
    text += (text.empty() ? "" : ", ") + ("'" + o.name + "' [" + dims + "]") +
            (o.channels_last ? " channels last" : "");
  }
  return text;
}

nlohmann::json OutputsJson(const std::vector<onnx_import::ModelOutput>& outputs) {
  if (outputs.empty()) return nullptr;
  nlohmann::json list = nlohmann::json::array();
  for (const onnx_import::ModelOutput& o : outputs) {
    list.push_back({{"name", o.name},
                    {"dims", o.dims},
                    {"values_per_sample", o.values},
                    {"channels_last", o.channels_last}});
  }
  return list;
}

}  // namespace ios::run
