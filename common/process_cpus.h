// The cores this process may run on: what every cpu device, core group and
// link measurement splits.
#pragma once

#include <vector>

namespace ios {

//! sched_getaffinity's cores, ascending; never empty (when the call fails:
//! 0 .. hardware_concurrency - 1).
std::vector<int> ProcessCpus();

}  // namespace ios
