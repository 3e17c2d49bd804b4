#include "common/model_source.h"

#include <filesystem>

#include "common/error.h"
#include "common/ios_json.h"
#include "common/printable.h"
#include "common/zoo.h"

namespace ios {
namespace {

// Parameterised names ("randwire_cifar10:s=7") count: BuildZooModel says
// what is wrong with a bad parameter better than "no such file" would.
bool IsZooName(const std::string& name) { return IsZooModelName(name); }

std::string ZooNames() {
  std::string names;
  for (const ZooEntry& entry : ZooModels()) names += (names.empty() ? "" : ", ") + entry.name;
  return names;
}

}  // namespace

LoadedModel LoadModel(const std::string& model) {
  if (model.starts_with(kZooPrefix)) {
    const std::string name = model.substr(kZooPrefix.size());
    if (!IsZooName(name)) {
      throw Error("unknown zoo model " + Quoted(name) + " (" + ZooNames() + ")");
    }
    return {BuildZooModel(name), name};
  }
  std::error_code error;
  const bool exists = std::filesystem::exists(model, error);
  if (IsZooName(model)) {
    // Either reading could be what was meant: neither is picked silently.
    // (A folder of that name is no model file: the zoo model is meant.)
    if (std::filesystem::is_regular_file(model, error)) {
      throw Error("model " + Quoted(model) + " names both a zoo model and a file here: write ./" +
                  model + " for the file or " + std::string(kZooPrefix) + model +
                  " for the zoo model");
    }
    return {BuildZooModel(model), model};
  }
  if (!exists) {
    throw Error("unknown model " + Quoted(model) + ": not a zoo model (" + ZooNames() +
                ") and no such file");
  }
  IosModel loaded = LoadIosJson(model);
  std::string name =
      loaded.graph.name.empty() ? std::filesystem::path(model).stem().string() : loaded.graph.name;
  return {std::move(loaded.graph), std::move(name)};
}

}  // namespace ios
