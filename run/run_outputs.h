// ios-run's lines about an ONNX model's outputs, which its one output holds
// in turn (onnx_import::ModelOutput): kept apart from run_main.cc, which
// prints them.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "onnx/onnx_import.h"

namespace ios::run {

//! "'scores' [1,512,1] channels last, 'boxes' [1,512,16] ...": the ONNX
//! outputs a network's one output holds in turn (N for a symbolic batch).
std::string OutputsText(const std::vector<onnx_import::ModelOutput>& outputs);

//! The same as JSON (name, dims, values_per_sample, channels_last each);
//! null for a model that is not ONNX.
nlohmann::json OutputsJson(const std::vector<onnx_import::ModelOutput>& outputs);

}  // namespace ios::run
