#include "devices/registry.h"

#include <algorithm>
#include <cstdlib>

#include "common/error.h"
#include "devices/cpu/cpu_link.h"
#include "devices/kinds.h"

namespace ios::devices {
namespace {

bool BelongsTo(std::string_view name, std::string_view prefix) {
  if (!name.starts_with(prefix)) return false;
  return name.size() == prefix.size() || name[prefix.size()] == ':' || name[prefix.size()] == ',';
}

}  // namespace

void Registry::Add(BackendKind kind) {
  if (kind.prefix.empty() || kind.prefix.find_first_of(":,") != std::string::npos) {
    throw Error("backend kind '" + kind.prefix +
                "': a prefix is a non-empty word without ':' or ','");
  }
  if (!kind.open_backend || !kind.open_device) {
    throw Error("backend kind '" + kind.prefix + "': open_backend and open_device are required");
  }
  for (const BackendKind& known : kinds_) {
    if (BelongsTo(kind.prefix, known.prefix) || BelongsTo(known.prefix, kind.prefix)) {
      throw Error("backend kind '" + kind.prefix + "' is already registered");
    }
  }
  kinds_.push_back(std::move(kind));
}

const BackendKind* Registry::Find(std::string_view name) const {
  const auto kind = std::find_if(kinds_.begin(), kinds_.end(),
                                 [&](const BackendKind& k) { return BelongsTo(name, k.prefix); });
  return kind == kinds_.end() ? nullptr : &*kind;
}

const BackendKind& Registry::Get(std::string_view name) const {
  if (const BackendKind* kind = Find(name)) return *kind;
  throw Error("unknown backend '" + std::string(name) + "'; valid names: " + Grammars());
}

std::unique_ptr<Backend> Registry::OpenBackend(const std::string& name,
                                               const BackendOptions& options) const {
  return Get(name).open_backend(name, options);
}

std::unique_ptr<exec::Device> Registry::OpenDevice(const std::string& name,
                                                   const BackendOptions& options) const {
  return Get(name).open_device(name, options);
}

bool Registry::NeedsOwnProcess(std::string_view name) const {
  const BackendKind* kind = Find(name);
  return kind != nullptr && kind->needs_own_process;
}

DeviceTiming Registry::TimingOf(std::string_view name) const {
  const BackendKind* kind = Find(name);
  return kind != nullptr ? kind->timing : DeviceTiming::kHostLaunched;
}

StageCostFacts Registry::CostFactsOf(const DeviceInfo& device) const {
  StageCostFacts facts;
  const BackendKind* kind = Find(device.backend);
  if (kind != nullptr && kind->prefix == device.backend && kind->cost_facts) {
    kind->cost_facts(device, facts);
  }
  return facts;
}

std::string Registry::Grammars() const {
  std::string grammars;
  for (const BackendKind& kind : kinds_) {
    grammars += (grammars.empty() ? "" : ", ") + kind.grammar;
  }
  return grammars;
}

const Registry& BuiltinRegistry() {
  // Immutable once built: a constant every thread may read.
  static const Registry registry = [] {
    Registry built;
    // One line per kind (devices/kinds.h); a new backend is a folder and a
    // line here.
    built.Add(WithCpuLinks(CpuKind()));  // core groups as devices: cpu/cpu_link.h
    built.Add(CudaKind());
    built.Add(SimKind());
    built.Add(ReferenceKind());
    return built;
  }();
  return registry;
}

void RefuseToOpen(BackendKind& kind, Refusal refuse) {
  kind.open_backend = [refuse](const std::string& name,
                               const BackendOptions& options) -> std::unique_ptr<Backend> {
    refuse(name, options);
    throw Error("backend '" + name + "' cannot be opened here");  // refuse throws first
  };
  kind.open_device = [refuse](const std::string& name,
                              const BackendOptions& options) -> std::unique_ptr<exec::Device> {
    refuse(name, options);
    throw Error("device '" + name + "' cannot be opened here");
  };
}

double FingerprintNumber(const std::string& fingerprint, std::string_view field) {
  const size_t at = fingerprint.find(field);
  if (at == std::string::npos) return 0;
  const char* text = fingerprint.c_str() + at + field.size();
  char* end = nullptr;
  const double value = std::strtod(text, &end);
  return end == text || !(value > 0) || value > 1e6 ? 0 : value;
}

StageCostFacts StageCostFactsOf(const DeviceInfo& device) {
  return BuiltinRegistry().CostFactsOf(device);
}

}  // namespace ios::devices
