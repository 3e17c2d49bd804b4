#include "common/model_source.h"

#include <filesystem>

#include "common/error.h"
#include "common/ios_json.h"
#include "common/printable.h"
#include "common/zoo.h"

namespace ios {

LoadedModel LoadModel(const std::string& model) {
  for (const ZooEntry& entry : ZooModels()) {
    if (entry.name == model) return {BuildZooModel(model), model};
  }
  if (!std::filesystem::exists(model)) {
    std::string names;
    for (const ZooEntry& entry : ZooModels()) names += (names.empty() ? "" : ", ") + entry.name;
    throw Error("unknown model " + Quoted(model) + ": not a zoo model (" + names +
                ") and no such file");
  }
  IosModel loaded = LoadIosJson(model);
  std::string name =
      loaded.graph.name.empty() ? std::filesystem::path(model).stem().string() : loaded.graph.name;
  return {std::move(loaded.graph), std::move(name)};
}

}  // namespace ios
