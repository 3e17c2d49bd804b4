// The HIOS simulation fixtures for tests: every instance, loaded once per
// test process (about 60 ms each).
#pragma once

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "hios/sim_instance.h"

namespace ios::hios::testing {

//! The instances under `dir` (the 78 the reference completed), sorted by
//! path, then those under `dir`/upstream_failed (the 22 it did not).
inline const std::vector<SimInstance>& AllSimInstances(const std::string& dir) {
  static const std::vector<SimInstance> all = [&] {
    std::vector<SimInstance> loaded;
    for (const std::string& sub : {dir, dir + "/upstream_failed"}) {
      std::vector<std::string> paths;
      for (const auto& entry : std::filesystem::directory_iterator(sub)) {
        if (entry.path().extension() == ".json") paths.push_back(entry.path().string());
      }
      std::sort(paths.begin(), paths.end());
      for (const std::string& path : paths) loaded.push_back(LoadSimInstance(path));
    }
    return loaded;
  }();
  return all;
}

}  // namespace ios::hios::testing
