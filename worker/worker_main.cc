// ios-worker: one per GPU. Connects to an ios-coordinator, measures the
// stages it is sent and answers each; reconnects when the coordinator
// restarts. Runs until SIGINT or SIGTERM. Exit codes: 0 after a signal, 1
// when the worker cannot start (bad key file), 2 for a bad option (a
// --backend it cannot open included, as ios-coordinator's --device), 3
// (worker::kExitMeasurementHung) when a measurement hung.
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "common/error.h"
#include "devices/linked.h"
#include "devices/sim/hang_after_backend.h"
#include "exec/device.h"
#include "net/context.h"
#include "net/curve.h"
#include "net/endpoint.h"
#include "worker/farm_worker.h"

namespace {

// Blocks SIGINT/SIGTERM in every thread and turns their arrival into a stop
// request, so shutdown runs through the normal (RAII) path.
class StopOnSignal {
 public:
  StopOnSignal() {
    sigemptyset(&signals_);
    sigaddset(&signals_, SIGINT);
    sigaddset(&signals_, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &signals_, nullptr);
    waiter_ = std::jthread([this](std::stop_token) {
      int signal = 0;
      sigwait(&signals_, &signal);
      // Not when our own destructor woke it: that is no signal to report.
      if (signal != 0 && !leaving_.load()) spdlog::info("signal {}: stopping", signal);
      source_.request_stop();
    });
  }
  ~StopOnSignal() {
    // Wake the waiter if no signal came.
    leaving_.store(true);
    if (!source_.stop_requested()) pthread_kill(waiter_.native_handle(), SIGTERM);
  }
  std::stop_token token() const { return source_.get_token(); }

 private:
  sigset_t signals_{};
  std::atomic<bool> leaving_{false};
  std::stop_source source_;
  std::jthread waiter_;
};

}  // namespace

namespace {

// ios-worker links every backend this build has, cuda included where CUDA
// was found (the coordinator, which must start without it, does not).
std::unique_ptr<ios::devices::Backend> OpenBackend(const std::string& name,
                                                   const ios::devices::BackendOptions& options) {
  return ios::devices::LinkedRegistry().OpenBackend(name, options);
}

// A --backend that names nothing or a bad option is a bad command line (2);
// a device that is named right but cannot be opened here (no GPU, no
// driver) is a failure to start (1), which a supervisor may retry.
int OpenFailureCode(const std::exception& e) {
  return dynamic_cast<const ios::exec::ExecError*>(&e) != nullptr ? 1 : 2;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace ios;
  worker::WorkerOptions options;
  std::string backend_name = "cpu";  // as ios-coordinator's --device
  devices::BackendOptions backend_options;
  std::string curve_server_key, curve_key, log_level = "info";
  int heartbeat_ms = 1000;
  CLI::App app{
      "ios-worker: measures candidate stages for ios-coordinator on one device. Start one per "
      "GPU; it reconnects when the coordinator restarts and runs until SIGINT/SIGTERM."};
  bool check_device = false;
  app.add_option("--connect,-c", options.endpoint,
                 "coordinator endpoint, e.g. tcp://host:5555 (required unless --check-device)");
  app.add_flag("--check-device", check_device,
               "open the --backend's device, print its name and fingerprint, and exit: 0 when it "
               "works, 1 when the device cannot be opened here, 2 for a bad name or option");
  app.add_option("--backend", backend_name,
                 "measurement backend, one of: " + devices::LinkedRegistry().Grammars() +
                     ". cpu: this machine's CPU on oneDNN, N threads per stage (default every "
                     "core), cache=cold (the default) flushes a stage's data from the caches "
                     "before each timed run (docs/cpu-backend.md); cuda: an NVIDIA GPU through "
                     "cuDNN (docs/gpu.md); sim: simulated GPUs; reference: naive loops, slow")
      ->default_val(backend_name);
  app.add_option("--devices", backend_options.devices,
                 "identical devices this worker owns and announces, so that it can time the "
                 "link between two of them (sim: GPUs on NVLink; cpu: this process's cores cut "
                 "into that many groups)")
      ->default_val(1)
      ->check(CLI::Range(1, 1024));
  app.add_option("--gpu", backend_options.gpu, "GPU ordinal (cuda backend)")
      ->default_val(0)
      ->check(CLI::NonNegativeNumber);
  app.add_option("--id", options.worker_id, "worker name in logs (default host:pid)");
  app.add_option("--capacity", options.capacity,
                 "queries held at once: one measuring, the rest queued")
      ->default_val(options.capacity)
      ->check(CLI::Range(1, 1024));
  app.add_option("--heartbeat-ms", heartbeat_ms,
                 "heartbeat period; the coordinator is presumed "
                 "gone after --liveness silent periods")
      ->default_val(heartbeat_ms)
      ->check(CLI::Range(10, 600000));
  app.add_option("--liveness", options.liveness, "silent heartbeat periods before reconnecting")
      ->default_val(options.liveness)
      ->check(CLI::Range(1, 100));
  app.add_option("--sim-delay-ms", backend_options.sim_delay_ms,
                 "sim backends: sleep this long per measurement (stands in for GPU time in "
                 "scaling benchmarks; reported latencies are unchanged)")
      ->default_val(0.0)
      ->check(CLI::Range(0.0, 600000.0));
  int sim_hang_after = -1;
  bool exit_with_parent = false;
  app.add_flag("--exit-with-parent", exit_with_parent,
               "stop (as on SIGTERM) when the process that started this one ends: "
               "ios-coordinator passes it to the ios-worker it starts itself");
  int max_measurement_ms = 0;
  app.add_option("--max-measurement-ms", max_measurement_ms,
                 "give up a measurement after this long and exit 3 (a hung device); default 0: "
                 "the coordinator's query timeout less a margin, at least 60 s "
                 "(docs/farm.md, \"A hung measurement\")")
      ->default_val(0)
      ->check(CLI::Range(0, 86400000));
  app.add_option("--sim-hang-after", sim_hang_after,
                 "for tests: after N measurements, every measurement of a sim backend hangs "
                 "(never returns), as on a hung device")
      ->check(CLI::NonNegativeNumber);
  // No CLI11 ExistingFile check: net::LoadKeyFile says what is wrong with a
  // key file (missing, not a regular file, malformed) and that exits 1, as
  // docs/farm.md says.
  app.add_option("--curve-server-key", curve_server_key,
                 "CURVE: the coordinator's public key file (.pub); needs --curve-key");
  app.add_option("--curve-key", curve_key, "CURVE: this worker's key pair file (.key)");
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error, off")
      ->default_val(log_level)
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "off"}));
  app.set_version_flag("--version", std::string("ios-worker ") + IOS_FARM_VERSION);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // CLI11's own codes (105, 109, ...) mean nothing to scripts: a bad
    // command line is 2, like every other usage error here.
    const int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }
  spdlog::set_default_logger(spdlog::stderr_color_mt("ios-worker"));
  spdlog::set_level(spdlog::level::from_str(log_level));
  spdlog::set_pattern("%Y-%m-%d %H:%M:%S.%e [%l] %v");
  if (curve_server_key.empty() != curve_key.empty()) {
    std::fprintf(stderr, "ios-worker: error: --curve-server-key and --curve-key go together\n");
    return 2;
  }
  options.max_measurement = std::chrono::milliseconds(max_measurement_ms);
  if (exit_with_parent) {
    // A coordinator killed outright (SIGKILL, or a signal it exits on) must
    // not leave its worker reconnecting forever and holding the device.
    const pid_t parent = getppid();
    if (prctl(PR_SET_PDEATHSIG, SIGTERM) != 0 || getppid() != parent) {
      std::fprintf(stderr, "ios-worker: error: --exit-with-parent: the parent is gone\n");
      return 1;
    }
  }
  if (sim_hang_after >= 0 && !backend_name.starts_with("sim:")) {
    std::fprintf(stderr, "ios-worker: error: --sim-hang-after needs a sim backend, not '%s'\n",
                 backend_name.c_str());
    return 2;
  }
  if (check_device) {
    try {
      const std::unique_ptr<devices::Backend> backend = OpenBackend(backend_name, backend_options);
      const DeviceInfo& device = backend->Device();
      std::printf("device: %s%s\nfingerprint: %s\n", device.name.c_str(),
                  device.simulated ? " (simulated)" : "", device.fingerprint.c_str());
      if (backend->Devices() > 1) {
        std::printf("devices: %d\n", backend->Devices());
        for (const LinkFigures& link : backend->Links()) {
          std::printf("link: %s, %g GB/s, %g us (%s)\n", link.kind.c_str(), link.gb_per_s,
                      link.latency_us, link.measured ? "measured" : "modelled");
        }
      }
      return 0;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "ios-worker: error: %s\n", e.what());
      return OpenFailureCode(e);
    }
  }
  if (options.endpoint.empty()) {
    std::fprintf(stderr, "ios-worker: error: --connect is required (or --check-device)\n");
    return 2;
  }
  if (const std::string problem =
          net::EndpointProblem(options.endpoint, net::EndpointUse::kConnect);
      !problem.empty()) {
    std::fprintf(stderr, "ios-worker: error: --connect '%s': %s\n", options.endpoint.c_str(),
                 problem.c_str());
    return 2;
  }
  try {
    // First, so that every thread started from here on (ZeroMQ's, a GPU
    // runtime's) inherits the blocked signals. A configuration error below
    // ends it quietly: the error is the only thing said.
    StopOnSignal stop;
    options.heartbeat = std::chrono::milliseconds(heartbeat_ms);
    if (!curve_key.empty()) {
      options.curve_keys = net::LoadKeyFile(curve_key);
      if (options.curve_keys->secret_key.empty()) {
        throw std::runtime_error(curve_key + ": holds no secret key; give the .key file");
      }
      options.curve_server_key = net::LoadKeyFile(curve_server_key).public_key;
    }
    if (options.worker_id.empty() && backend_options.gpu != 0) {
      options.worker_id = "gpu" + std::to_string(backend_options.gpu);
    }
    std::unique_ptr<devices::Backend> backend;
    try {
      backend = OpenBackend(backend_name, backend_options);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "ios-worker: error: %s\n", e.what());
      return OpenFailureCode(e);
    }
    if (backend->Devices() != backend_options.devices) {
      // A kind that ignores --devices would announce one device: say so now.
      std::fprintf(stderr, "ios-worker: error: --devices %d: backend '%s' owns %d device(s)\n",
                   backend_options.devices, backend_name.c_str(), backend->Devices());
      return 2;
    }
    net::Context context;
    if (sim_hang_after >= 0) {
      backend = std::make_unique<devices::HangAfterBackend>(std::move(backend), sim_hang_after);
    }
    worker::Worker worker(context, std::move(backend), options);
    worker.Run(stop.token());
    const worker::WorkerCounters counts = worker.counters();
    spdlog::info("stopped: {} measured, {} failed, {} connections", counts.measured, counts.failed,
                 counts.connects);
    return 0;
  } catch (const worker::WorkerLost& e) {
    std::fprintf(stderr, "ios-worker: error: %s\n", e.what());
    if (e.cause() != worker::WorkerLost::Cause::kMeasurementHung) return 1;
    // The worker and its context are gone (their destructors sent the
    // timeout answer), but the abandoned measuring thread is still inside the
    // backend: exit handlers and static destructors (a GPU runtime's among
    // them) could block on the hung device or free what that thread uses.
    spdlog::default_logger()->flush();
    std::fflush(nullptr);
    std::_Exit(worker::kExitMeasurementHung);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ios-worker: error: %s\n", e.what());
    return 1;
  }
}
