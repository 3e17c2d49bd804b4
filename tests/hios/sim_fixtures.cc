#include "tests/hios/sim_fixtures.h"

#include <algorithm>
#include <filesystem>

namespace ios::hios::fixtures {

const std::vector<SimInstance>& AllInstances() {
  static const std::vector<SimInstance> all = [] {
    std::vector<SimInstance> loaded;
    for (const std::string& dir : {kInstanceDir, kInstanceDir + "/upstream_failed"}) {
      std::vector<std::string> paths;
      for (const auto& entry : std::filesystem::directory_iterator(dir)) {
        if (entry.path().extension() == ".json") paths.push_back(entry.path().string());
      }
      std::sort(paths.begin(), paths.end());
      for (const std::string& path : paths) loaded.push_back(LoadSimInstance(path));
    }
    return loaded;
  }();
  return all;
}

std::vector<const SimInstance*> LoadAll(bool failed) {
  std::vector<const SimInstance*> chosen;
  for (const SimInstance& sim : AllInstances()) {
    if (failed || sim.upstream_error.empty()) chosen.push_back(&sim);
  }
  return chosen;
}

}  // namespace ios::hios::fixtures
