// The cpu device's name: "cpu[,threads=N][,cpus=LIST][,cache=cold|warm]".
#include <charconv>
#include <sstream>
#include <string>

#include "common/error.h"
#include "devices/cpu/cpu_device.h"

namespace ios::devices {
namespace {

constexpr const char* kGrammar =
    "the grammar is cpu[,threads=N][,cpus=LIST][,cache=cold|warm] (N from 1 to 4096; LIST: "
    "cores and ranges joined by '+', e.g. 0-3+8)";

//! A whole number from `lo` to `hi`, or -1.
int WholeNumber(const std::string& text, int lo, int hi) {
  int value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || value < lo || value > hi) {
    return -1;
  }
  return value;
}

//! "0-3+8" -> 0 1 2 3 8: ascending, no core twice.
std::vector<int> CpuList(const std::string& name, const std::string& value) {
  constexpr int kMaxCpu = 4095;
  const std::string bad = "backend '" + name + "': cpus: '" + value + "' is not a list of cores";
  std::vector<int> cpus;
  std::stringstream parts(value);
  std::string part;
  while (std::getline(parts, part, '+')) {
    const size_t dash = part.find('-');
    const int first = WholeNumber(part.substr(0, dash), 0, kMaxCpu);
    const int last =
        dash == std::string::npos ? first : WholeNumber(part.substr(dash + 1), 0, kMaxCpu);
    if (first < 0 || last < first) throw Error(bad + " (" + kGrammar + ")");
    for (int cpu = first; cpu <= last; ++cpu) {
      if (!cpus.empty() && cpu <= cpus.back()) {
        throw Error(bad + ": cores must ascend, each once");
      }
      cpus.push_back(cpu);
    }
  }
  if (cpus.empty() || value.back() == '+') throw Error(bad + " (" + kGrammar + ")");
  return cpus;
}

}  // namespace

CpuOptions ParseCpuOptions(const std::string& name) {
  const std::string grammar = kGrammar;
  if (name == "cpu") return {};
  if (name == "cpu,") throw Error("backend 'cpu,': an option is missing; " + grammar);
  if (!name.starts_with("cpu,")) throw Error("backend '" + name + "': " + grammar);
  CpuOptions options;
  std::stringstream rest(name.substr(4));
  std::string option;
  while (std::getline(rest, option, ',')) {
    const size_t equals = option.find('=');
    const std::string key = option.substr(0, equals);
    const std::string value = equals == std::string::npos ? "" : option.substr(equals + 1);
    if (key == "cache") {
      if (value != "cold" && value != "warm") {
        throw Error("backend '" + name + "': cache must be cold or warm, not '" + value + "'");
      }
      options.cold_stage_runs = value == "cold";
    } else if (key == "cpus") {
      options.cpus = CpuList(name, value);
    } else if (key == "threads") {
      options.threads = WholeNumber(value, 1, 4096);
      if (options.threads < 0) {
        throw Error("backend '" + name + "': threads must be a whole number from 1 to 4096, not '" +
                    value + "'");
      }
    } else {
      throw Error("backend '" + name + "': unknown option '" + key + "'; " + grammar);
    }
  }
  return options;
}

}  // namespace ios::devices
