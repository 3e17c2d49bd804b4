// The cpu caches as a measurement protocol sees them: which bytes a
// prepared program touches, by role, and putting them in the state a
// protocol asks for (docs/execution.md, "How a stage is measured").
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace ios::devices::cpu {

//! [begin, end) of addresses.
using Range = std::pair<uintptr_t, uintptr_t>;

//! What a program's runs touch, in disjoint sorted ranges per role.
struct Footprint {
  //! Convolution weights and biases, as oneDNN reordered them at prepare.
  std::vector<Range> weights;
  //! The storage of the program's inputs (what the stage's producers write).
  std::vector<Range> inputs;
  //! Every other storage slot: what the program's steps write.
  std::vector<Range> activations;
  //! Scratchpads and layout temporaries, one arena of each per thread.
  std::vector<Range> scratch;
};

//! Sorts `ranges` and merges those that overlap or touch.
std::vector<Range> MergeRanges(std::vector<Range> ranges);

//! Writes every line of `ranges` back and drops it from every cache level,
//! so the next access reads memory (x86-64, CLFLUSHOPT where the cpu has
//! it; elsewhere nothing happens). Ends with a fence.
void FlushRanges(const std::vector<Range>& ranges);

//! Stores to every cache line of `ranges` without changing a value: the
//! lines end up as a producer that just wrote them leaves them (modified,
//! most recently used, as much of them as the caches hold).
void TouchRanges(const std::vector<Range>& ranges);

//! Bytes of the largest data or unified cache the first core sees, from
//! the kernel's cache description under `sysfs_cache_dir`
//! (index*/level, type, size); 0 when it does not say.
int64_t LastLevelCacheBytes(
    const std::string& sysfs_cache_dir = "/sys/devices/system/cpu/cpu0/cache");

}  // namespace ios::devices::cpu
