#include "coordinator/device_list.h"

#include <algorithm>
#include <string>

#include "common/error.h"
#include "common/printable.h"

namespace ios::coordinator {

namespace {

// 0 1 2 5 -> "0-2+5": the cpu device's cpus= list.
std::string CpuListText(const std::vector<int>& cpus) {
  std::string text;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    text += (text.empty() ? "" : "+") + std::to_string(cpus[i]);
    if (j > i) text += "-" + std::to_string(cpus[j]);
    i = j + 1;
  }
  return text;
}

bool IsCpuName(const std::string& name) { return name == "cpu" || name.starts_with("cpu,"); }

// "cuda" or "cuda,OPTIONS": a cuda name that picks no GPU.
bool IsAnyGpuCudaName(const std::string& name) {
  return name == "cuda" || name.starts_with("cuda,");
}

}  // namespace

std::vector<std::string> ExpandDeviceList(const std::string& list, const std::vector<int>& cpus) {
  constexpr int kMaxDevices = 64;
  std::vector<std::string> names;
  size_t begin = 0;
  for (int item = 0; begin <= list.size(); ++item) {
    const size_t end = std::min(list.find(';', begin), list.size());
    const std::string name = list.substr(begin, end - begin);
    begin = end + 1;
    const std::string where = "--devices: item " + std::to_string(item) + " " + Quoted(name);
    if (name.empty()) throw Error(where + ": empty (items are separated by ';')");
    // BASExN: an 'x' followed by digits only, after a base.
    const size_t x = name.find_last_of('x');
    const bool repeated = x != std::string::npos && x > 0 && x + 1 < name.size() &&
                          name.find_first_not_of("0123456789", x + 1) == std::string::npos;
    if (!repeated) {
      names.push_back(name);
      continue;
    }
    const std::string base = name.substr(0, x);
    const std::string digits = name.substr(x + 1);
    const int count = digits.size() > 2 ? kMaxDevices + 1 : std::stoi(digits);
    if (count < 1 || count > kMaxDevices) {
      throw Error(where + ": the count must be from 1 to " + std::to_string(kMaxDevices));
    }
    if (IsAnyGpuCudaName(base)) {
      // One GPU each: cuda:0, cuda:1, ... with the base's options.
      for (int i = 0; i < count; ++i) names.push_back("cuda:" + std::to_string(i) + base.substr(4));
      continue;
    }
    if (!IsCpuName(base)) {
      names.insert(names.end(), static_cast<size_t>(count), base);
      continue;
    }
    if (base.find(",threads=") != std::string::npos || base.find(",cpus=") != std::string::npos) {
      throw Error(where + ": " + Quoted(base) +
                  " sets threads or cpus, which cpuxN decides (each device gets its own share "
                  "of the cores); list the devices one by one instead");
    }
    if (count > static_cast<int>(cpus.size())) {
      throw Error(where + ": " + std::to_string(count) +
                  " cpu devices need as many cores; this "
                  "process may run on " +
                  std::to_string(cpus.size()) + " (list devices one by one to share cores)");
    }
    size_t next = 0;
    for (int i = 0; i < count; ++i) {
      const size_t share = cpus.size() / static_cast<size_t>(count) +
                           (static_cast<size_t>(i) < cpus.size() % static_cast<size_t>(count));
      const std::vector<int> mine(cpus.begin() + static_cast<std::ptrdiff_t>(next),
                                  cpus.begin() + static_cast<std::ptrdiff_t>(next + share));
      next += share;
      names.push_back(base + ",threads=" + std::to_string(share) + ",cpus=" + CpuListText(mine));
    }
  }
  return names;
}

}  // namespace ios::coordinator
