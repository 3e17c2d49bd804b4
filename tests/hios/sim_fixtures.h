// The HIOS simulation fixtures (shared/fixtures/hios-sim), loaded once per
// test process: every test file of hios_sim_test shares them.
#pragma once

#include <string>
#include <vector>

#include "hios/sim_instance.h"

namespace ios::hios::fixtures {

//! Where CMake unpacked the instances; tests IOS_REQUIRE_FIXTURE it.
inline const std::string kInstanceDir = IOS_HIOS_INSTANCES;

//! Every instance (about 20 ms each to load): the 78 the reference
//! completed first (sorted by path), then the 22 it did not.
const std::vector<SimInstance>& AllInstances();

//! The 78 instances the reference completed, or with `failed` all 100.
std::vector<const SimInstance*> LoadAll(bool failed);

}  // namespace ios::hios::fixtures
