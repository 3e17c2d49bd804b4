// The cuda backend's name and options (devices/cuda/cuda_device.h).
#include <charconv>
#include <sstream>
#include <string>

#include "common/error.h"
#include "devices/cuda/cuda_device.h"

namespace ios::devices {
namespace {

int ParseWhole(const std::string& name, const std::string& what, const std::string& value, int low,
               int high) {
  int number = 0;
  const auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), number);
  if (error != std::errc() || end != value.data() + value.size() || number < low || number > high) {
    throw Error("backend '" + name + "': " + what + " must be a whole number from " +
                std::to_string(low) + " to " + std::to_string(high) + ", not '" + value + "'");
  }
  return number;
}

}  // namespace

bool IsCudaName(const std::string& name) {
  return name == "cuda" || name.starts_with("cuda:") || name.starts_with("cuda,");
}

CudaOptions ParseCudaOptions(const std::string& name, int default_gpu) {
  const std::string grammar =
      "the grammar is cuda[:GPU][,math=fp32|tf32][,algo=exhaustive|heuristic][,workspace_mb=M]";
  if (!IsCudaName(name)) throw Error("backend '" + name + "': " + grammar);
  CudaOptions options;
  options.gpu = default_gpu;
  std::string rest = name.substr(4);
  if (rest.starts_with(":")) {
    const size_t comma = rest.find(',');
    options.gpu = ParseWhole(name, "the GPU", rest.substr(1, comma - 1), 0, 1023);
    rest = comma == std::string::npos ? "" : rest.substr(comma);
  }
  if (rest == ",") throw Error("backend '" + name + "': an option is missing; " + grammar);
  std::stringstream options_text(rest.empty() ? "" : rest.substr(1));
  std::string option;
  while (std::getline(options_text, option, ',')) {
    const size_t equals = option.find('=');
    const std::string key = option.substr(0, equals);
    const std::string value = equals == std::string::npos ? "" : option.substr(equals + 1);
    if (key == "math") {
      if (value != "fp32" && value != "tf32") {
        throw Error("backend '" + name + "': math must be fp32 or tf32, not '" + value + "'");
      }
      options.math = value == "tf32" ? CudaOptions::Math::kTf32 : CudaOptions::Math::kFp32;
    } else if (key == "algo") {
      if (value != "exhaustive" && value != "heuristic") {
        throw Error("backend '" + name + "': algo must be exhaustive or heuristic, not '" + value +
                    "'");
      }
      options.algo =
          value == "heuristic" ? CudaOptions::Algo::kHeuristic : CudaOptions::Algo::kExhaustive;
    } else if (key == "workspace_mb") {
      options.workspace_mb = ParseWhole(name, "workspace_mb", value, 0, 65536);
    } else {
      throw Error("backend '" + name + "': unknown option '" + key + "'; " + grammar);
    }
  }
  return options;
}

}  // namespace ios::devices
