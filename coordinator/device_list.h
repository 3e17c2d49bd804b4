// The --devices grammar of ios-coordinator and ios-run: several devices of
// one inference, by name or BASExN, cpu devices each on its own cores.
#pragma once

#include <string>
#include <vector>

#include "common/process_cpus.h"

namespace ios::coordinator {

using ::ios::ProcessCpus;  // common/process_cpus.h

//! Device names from --devices: ';'-separated names (a name may itself
//! hold ',': "cpu,threads=1"), each either a device name or BASExN, N
//! devices of BASE. For the cpu, "cpuxN" (or "cpu,cache=...xN") gives each
//! of N devices its own share of `cpus`, contiguous and as equal as can be
//! ("cpu,threads=1,cpus=0", "cpu,threads=1,cpus=1" for cpux2 on cores 0
//! and 1). "cudaxN" (or "cuda,...xN") gives GPUs 0..N-1 ("cuda:0",
//! "cuda:1" for cudax2); a BASE naming a GPU repeats it. Throws ios::Error naming the item: an
//! empty one, N outside 1..64, a cpu BASE that sets threads or cpus itself, or more cpu devices
//! than cores.
std::vector<std::string> ExpandDeviceList(const std::string& list, const std::vector<int>& cpus);

}  // namespace ios::coordinator
