// The one list of backends: which command-line names open what, and what a
// device's measurements tell the search. Every tool opens backends and
// devices through a Registry.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "devices/backend.h"
#include "exec/device.h"

namespace ios::devices {

//! One kind of backend. Its names are `prefix` alone or followed by ':' or
//! ',' and the kind's own options ("cpu,threads=2", "sim:v100", "cuda:1").
struct BackendKind {
  //! "cpu", "sim", "cuda": also DeviceInfo::backend of the devices it opens.
  std::string prefix;
  //! The names it takes, for --help and errors ("cpu[,threads=N]...").
  std::string grammar;
  //! Opens a measuring backend for `name`. Throws ios::Error naming the
  //! option and the grammar for a bad name, or saying why this process
  //! cannot (the cuda kind where CUDA is not linked).
  std::function<std::unique_ptr<Backend>(const std::string& name, const BackendOptions& options)>
      open_backend;
  //! Opens an execution device for whole networks (ios-run). Throws
  //! ios::Error where the kind cannot execute (sim models latencies only).
  std::function<std::unique_ptr<exec::Device>(const std::string& name,
                                              const BackendOptions& options)>
      open_device;
  //! Fills what a device's fingerprint tells about every stage it runs
  //! (lazy measurement's bounds); empty: nothing known.
  std::function<void(const DeviceInfo& device, StageCostFacts& facts)> cost_facts;
  //! A coordinator measures on this kind only through an ios-worker process
  //! (the coordinator must start where the kind's library is missing).
  bool needs_own_process = false;
  //! ios-run may also replay a scheduled network as one captured graph.
  bool replays_graphs = false;
  //! How its devices' timings come about: their default measurement and
  //! verification settings (DefaultMeasureSettings).
  DeviceTiming timing = DeviceTiming::kHostLaunched;
  //! ios-run --check also compares with this kind's results, where the
  //! registry has it ("cpu" for a GPU: other libraries, other algorithms).
  std::string cross_check_on;
};

//! An immutable-once-built list of kinds. Tools build one at start-up
//! (BuiltinRegistry, LinkedRegistry in devices/linked.h) and pass it down;
//! tests add their own kinds to a copy.
class Registry {
 public:
  //! Adds `kind`. Throws ios::Error when its prefix is empty, contains ':'
  //! or ',', or is taken, or when it cannot open a backend.
  void Add(BackendKind kind);

  //! The kind `name` belongs to, or nullptr.
  const BackendKind* Find(std::string_view name) const;
  //! The kind `name` belongs to. Throws ios::Error listing every valid name.
  const BackendKind& Get(std::string_view name) const;

  //! Get(name).open_backend(name, options).
  std::unique_ptr<Backend> OpenBackend(const std::string& name,
                                       const BackendOptions& options = {}) const;
  //! Get(name).open_device(name, options).
  std::unique_ptr<exec::Device> OpenDevice(const std::string& name,
                                           const BackendOptions& options = {}) const;
  //! Whether a coordinator must measure on `name` through an ios-worker
  //! process; false for unknown names (they fail when opened).
  bool NeedsOwnProcess(std::string_view name) const;
  //! The timing of the kind `name` belongs to, for its default settings;
  //! kHostLaunched for unknown names (they fail when opened).
  DeviceTiming TimingOf(std::string_view name) const;
  //! The facts of the kind whose prefix is `device.backend`; none if unknown.
  StageCostFacts CostFactsOf(const DeviceInfo& device) const;
  //! Every kind's grammar, comma-separated, for help texts and errors.
  std::string Grammars() const;

  const std::vector<BackendKind>& kinds() const { return kinds_; }

 private:
  std::vector<BackendKind> kinds_;
};

//! The kinds in this library, whatever links it: sim, cpu (where oneDNN
//! was found), reference, and cuda by name only (it opens in tools that link
//! CUDA: LinkedRegistry). Built once, never changed.
const Registry& BuiltinRegistry();

//! BuiltinRegistry().CostFactsOf(device): the search's bounds.
StageCostFacts StageCostFactsOf(const DeviceInfo& device);

}  // namespace ios::devices
