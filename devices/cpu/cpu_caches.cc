#include "devices/cpu/cpu_caches.h"

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#endif

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <string_view>
#include <system_error>

namespace ios::devices::cpu {
namespace {

constexpr uintptr_t kLine = 64;

#if defined(__x86_64__)
//! CLFLUSHOPT (CPUID leaf 7, EBX bit 23): flushes lines without
//! serialising on each other, many times faster than CLFLUSH.
bool HaveClflushopt() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) != 0 && (ebx & (1u << 23)) != 0;
}

__attribute__((target("clflushopt"))) void FlushLinesOpt(uintptr_t begin, uintptr_t end) {
  for (uintptr_t line = begin; line < end; line += kLine) {
    _mm_clflushopt(reinterpret_cast<void*>(line));
  }
}

void FlushLines(uintptr_t begin, uintptr_t end) {
  for (uintptr_t line = begin; line < end; line += kLine) {
    _mm_clflush(reinterpret_cast<const void*>(line));
  }
}
#endif

//! The first line of text in `path`, or "" when it cannot be read.
std::string FirstLine(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  while (!line.empty() && (line.back() == ' ' || line.back() == '\r')) line.pop_back();
  return line;
}

//! sysfs writes cache sizes as "32768K"; M and G are taken too. 0 when the
//! text is not a size.
int64_t ParseSize(std::string_view text) {
  int64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || value <= 0) return 0;
  const std::string_view unit(end, static_cast<size_t>(text.data() + text.size() - end));
  const int shift = unit.empty() ? 0 : unit == "K" ? 10 : unit == "M" ? 20 : unit == "G" ? 30 : -1;
  if (shift < 0 || value > (INT64_MAX >> shift)) return 0;
  return value << shift;
}

}  // namespace

std::vector<Range> MergeRanges(std::vector<Range> ranges) {
  std::sort(ranges.begin(), ranges.end());
  std::vector<Range> merged;
  for (const Range& range : ranges) {
    if (range.first >= range.second) continue;
    if (!merged.empty() && range.first <= merged.back().second) {
      merged.back().second = std::max(merged.back().second, range.second);
    } else {
      merged.push_back(range);
    }
  }
  return merged;
}

void FlushRanges(const std::vector<Range>& ranges) {
#if defined(__x86_64__)
  static const bool optimized = HaveClflushopt();
  for (const auto& [begin, end] : ranges) {
    const uintptr_t first = begin & ~(kLine - 1);
    optimized ? FlushLinesOpt(first, end) : FlushLines(first, end);
  }
  _mm_mfence();
#else
  (void)ranges;
#endif
}

void TouchRanges(const std::vector<Range>& ranges) {
  for (const auto& [begin, end] : ranges) {
    // One byte of each line, read and written back: a store takes the line
    // for writing as a producer's store would; the value stays.
    for (uintptr_t at = begin; at < end; at = (at & ~(kLine - 1)) + kLine) {
      volatile unsigned char* byte = reinterpret_cast<volatile unsigned char*>(at);
      *byte = *byte;
    }
  }
}

int64_t LastLevelCacheBytes(const std::string& sysfs_cache_dir) {
  std::error_code error;
  std::filesystem::directory_iterator entries(sysfs_cache_dir, error);
  if (error) return 0;
  int best_level = 0;
  int64_t best_bytes = 0;
  for (const auto& entry : entries) {
    if (!entry.path().filename().string().starts_with("index")) continue;
    if (FirstLine(entry.path() / "type") == "Instruction") continue;
    int level = 0;
    const std::string level_text = FirstLine(entry.path() / "level");
    std::from_chars(level_text.data(), level_text.data() + level_text.size(), level);
    const int64_t bytes = ParseSize(FirstLine(entry.path() / "size"));
    if (level <= 0 || bytes <= 0) continue;
    if (level > best_level || (level == best_level && bytes > best_bytes)) {
      best_level = level;
      best_bytes = bytes;
    }
  }
  return best_bytes;
}

}  // namespace ios::devices::cpu
