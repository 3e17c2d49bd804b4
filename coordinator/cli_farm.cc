// ios-coordinator's farm: embedded worker threads, or a child ios-worker
// process for a device this process does not link (cuda).
#include "coordinator/cli_farm.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "common/error.h"
#include "coordinator/cli.h"
#include "coordinator/worker_process.h"
#include "devices/registry.h"
#include "net/endpoint.h"

namespace ios::coordinator::cli {
namespace {

// Whether the search measures through a child ios-worker: when asked, and
// for cuda without --bind (this process does not link CUDA).
bool UsesWorkerProcess(const CliOptions& cli) {
  return cli.worker_process ||
         (devices::BuiltinRegistry().NeedsOwnProcess(cli.device) && cli.farm.bind.empty());
}

int LocalWorkers(const CliOptions& cli) {
  if (cli.local_workers >= 0) return cli.local_workers;
  return cli.farm.bind.empty() && !UsesWorkerProcess(cli) ? 1 : 0;
}

}  // namespace

// What is wrong with --device or --bind, before anything is opened or
// started; empty when nothing is.
std::string FarmOptionProblem(const CliOptions& cli) {
  if (cli.bind_given && cli.farm.bind.empty()) {
    return "--bind is empty; give an endpoint, e.g. --bind tcp://*:5555, or leave it out";
  }
  if (!cli.farm.bind.empty()) {
    const std::string problem = net::EndpointProblem(cli.farm.bind, net::EndpointUse::kBind);
    if (!problem.empty()) return "--bind '" + cli.farm.bind + "': " + problem;
  }
  if (cli.device.empty()) return "--device is empty; give a device, e.g. --device cpu";
  if (UsesWorkerProcess(cli)) {
    // Open the device in a short-lived child first: a worker that cannot
    // would otherwise fail out of sight while the search waits for it.
    const std::string worker = FindWorkerBinary();
    if (worker.empty()) {
      return "--device '" + cli.device +
             "': measuring through an ios-worker process needs ios-worker beside "
             "ios-coordinator (or in the build tree's worker/); build it, or start one yourself "
             "and give --bind (docs/gpu.md)";
    }
    if (const std::string problem = CheckDeviceInWorker(worker, cli.device); !problem.empty()) {
      return "--device '" + cli.device + "': the local ios-worker cannot measure on it: " + problem;
    }
  }
  if (LocalWorkers(cli) > 0) {
    // The embedded workers measure on --device: it must be a backend here.
    // (With remote workers only, it selects them by name and may be anything.)
    try {
      devices::BuiltinRegistry().OpenBackend(cli.device);
    } catch (const Error& e) {
      return "--device '" + cli.device + "': " + e.what();
    }
  }
  return {};
}

RunningFarm StartFarm(const CliOptions& cli) {
  FarmOptions options = cli.farm;
  options.device = cli.device;
  options.local_backend = cli.device;
  options.local_workers = LocalWorkers(cli);
  options.wait_for_workers = std::chrono::seconds(cli.wait_workers_s);
  options.heartbeat = std::chrono::milliseconds(cli.heartbeat_ms);
  options.query_timeout = std::chrono::seconds(cli.query_timeout_s);
  if (!UsesWorkerProcess(cli)) return {nullptr, Farm::Start(options)};
  // FarmOptionProblem found the worker and checked the device.
  const std::string worker = FindWorkerBinary();
  if (options.bind.empty()) options.bind = "tcp://127.0.0.1:*";
  options.min_workers = std::max(options.min_workers, 1);
  std::unique_ptr<Farm> farm = Farm::Start(options);
  std::vector<std::string> args{"--backend",
                                cli.device,
                                "--connect",
                                LoopbackTo(farm->BoundEndpoint()),
                                "--id",
                                "local",
                                "--log-level",
                                "warn",
                                "--exit-with-parent"};
  if (!cli.farm.curve_secret_key_file.empty()) {
    throw Error(
        "--worker-process does not carry CURVE keys to its child; start the worker "
        "yourself with --curve-key and --curve-server-key");
  }
  if (cli.farm.local_backend_options.devices > 1) {  // --link measure: it times the link
    args.push_back("--devices");
    args.push_back(std::to_string(cli.farm.local_backend_options.devices));
  }
  if (cli.farm.local_backend_options.sim_delay_ms > 0) {
    args.push_back("--sim-delay-ms");
    args.push_back(std::to_string(cli.farm.local_backend_options.sim_delay_ms));
  }
  auto process = std::make_unique<SupervisedWorker>(worker, args);
  spdlog::info("measuring through ios-worker process {} ({})", process->pid(), worker);
  return {std::move(process), std::move(farm)};
}

}  // namespace ios::coordinator::cli
