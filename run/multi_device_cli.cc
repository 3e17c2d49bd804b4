#include "run/multi_device_cli.h"

#include <cmath>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>

#include "common/error.h"
#include "common/printable.h"
#include "devices/linked.h"
#include "run/multi_device_run.h"
#include "run/network_run.h"

namespace ios::run {
namespace {

using nlohmann::json;

json TimingJson(const Timing& t) {
  return {{"min", t.min_ms},
          {"median", t.protocol.median_ms},
          {"max", t.max_ms},
          {"spread", t.protocol.spread_ms},
          {"runs", t.repeats}};
}

json ComparisonJson(const Comparison& c, double tolerance) {
  return {{"max_abs_diff", c.max_abs_diff},
          {"max_abs_reference", c.max_abs_reference},
          {"passed", c.Within(tolerance)}};
}

double MiB(int64_t bytes) { return static_cast<double>(bytes) / (1 << 20); }

}  // namespace

void CheckMultiRunDevice(const std::string& name) {
  const devices::BackendKind* kind = devices::LinkedRegistry().Find(name);
  if (kind == nullptr) {
    throw Error("--devices: unknown device " + Quoted(name) +
                "; valid: " + devices::LinkedRegistry().Grammars());
  }
#ifdef IOS_HAVE_CUDA_BACKEND
  // GPUs copy between themselves (devices/cuda/cuda_multi.h).
  if (kind->prefix == "cuda") return;
  constexpr const char* kCuda = "; or cuda devices, e.g. cudax2";
  constexpr const char* kWhyNot = " (sim models latencies only)";
#else
  constexpr const char* kCuda = "";
  constexpr const char* kWhyNot =
      " (sim models latencies only; cuda needs an ios-run built with CUDA, docs/gpu.md)";
#endif
  if (kind->prefix != "cpu" && kind->prefix != "reference") {
    throw Error("--devices: " + Quoted(name) +
                ": multi-device runs take cpu devices (core groups as devices, e.g. cpux2; or " +
                "reference" + kCuda + "), not " + kind->prefix + kWhyNot);
  }
}

int RunMultiDeviceCli(const MultiCliOptions& cli, const coordinator::LoadedMultiSchedule& file,
                      const exec::WeightStore& weights, std::span<const float> input) {
  const Graph& graph = file.graph;
  coordinator::MultiDeviceSchedule schedule = file.schedule;
  if (!cli.devices.empty()) {
    std::vector<std::string> names = ExpandDeviceList(cli.devices, ProcessCpus());
    if (names.size() != schedule.devices.size()) {
      throw Error("--devices: " + std::to_string(names.size()) + " devices for a schedule over " +
                  std::to_string(schedule.devices.size()) + " (" + cli.schedule_path + ")");
    }
    schedule.devices = std::move(names);
  }
  std::vector<std::unique_ptr<exec::Device>> owned;
  std::vector<exec::Device*> devices;
  for (const std::string& name : schedule.devices) {
    CheckMultiRunDevice(name);
    owned.push_back(devices::LinkedRegistry().OpenDevice(name));
    devices.push_back(owned.back().get());
  }
  if (!cli.json) {
    std::string names;
    for (const std::string& name : schedule.devices) names += (names.empty() ? "" : "; ") + name;
    std::printf("ios-run: %s on %zu devices (%s), batch %d, multi-device schedule %s\n",
                Printable(cli.model_name).c_str(), schedule.devices.size(),
                Printable(names).c_str(), cli.batch, Printable(cli.schedule_path).c_str());
    std::fflush(stdout);
  }
  MultiRunOptions options;
  options.batch = cli.batch;
  options.transfer_timeout = cli.transfer_timeout;
  const MultiDeviceExecution run =
      ExecuteMultiDevice(devices, graph, schedule, weights, input, &cli.timing, options);
  int64_t copied = 0;
  for (const coordinator::Transfer& t : run.transfers) copied += t.bytes;

  bool passed = true;
  json check = nullptr;
  if (cli.check) {
    // Sequential on one device of the first device's kind and options.
    std::unique_ptr<exec::Device> single =
        devices::LinkedRegistry().OpenDevice(schedule.devices[0]);
    const Execution sequential = Execute(*single, graph, SequentialNetworkSchedule(graph), weights,
                                         cli.batch, input, nullptr);
    const Comparison c = Compare(run.output, sequential.output);
    passed = c.Within(cli.check_tolerance);
    check = {{"tolerance", cli.check_tolerance},
             {"single_device", schedule.devices[0]},
             {"against_sequential", ComparisonJson(c, cli.check_tolerance)}};
    if (SmallEnoughForReference(graph, cli.batch)) {
      std::unique_ptr<exec::Device> reference = exec::MakeReferenceDevice();
      const Execution naive = Execute(*reference, graph, SequentialNetworkSchedule(graph), weights,
                                      cli.batch, input, nullptr);
      const Comparison r = Compare(run.output, naive.output);
      passed = passed && r.Within(cli.check_tolerance);
      check["against_reference"] = ComparisonJson(r, cli.check_tolerance);
    } else {
      check["against_reference"] = "skipped: too large for the naive reference device";
    }
    check["passed"] = passed;
  }
  json expect = nullptr;
  if (cli.expected != nullptr) {
    const Comparison c = Compare(run.output, *cli.expected);
    passed = passed && c.Within(cli.expect_tolerance);
    expect = ComparisonJson(c, cli.expect_tolerance);
    expect["file"] = cli.expect_file;
    expect["tolerance"] = cli.expect_tolerance;
  }
  const coordinator::MultiScheduleInfo& info = file.info;
  const Timing& t = run.timing;
  if (cli.json) {
    json per_device = json::array();
    for (const DeviceRunSummary& d : run.devices) {
      per_device.push_back({{"name", d.name},
                            {"operators", d.operators},
                            {"stages", d.stages},
                            {"steps", d.steps},
                            {"copies_in", d.received},
                            {"copies_out", d.sent},
                            {"peak_activation_bytes", d.memory.allocated_bytes * cli.batch}});
    }
    const json out = {
        {"model", cli.model_name},
        {"schedule", cli.schedule_path},
        {"mapper", info.mapper},
        {"batch", cli.batch},
        {"execution", "multi-device"},
        {"devices", std::move(per_device)},
        {"copies", run.transfers.size()},
        {"copied_bytes", copied},
        {"copies_by", run.device_copies ? "device" : "host staging"},
        {"measured_ms", TimingJson(t)},
        {"predicted_ms", info.predicted_ms ? json(*info.predicted_ms) : json(nullptr)},
        {"predicted_simulated", info.simulated},
        {"check", check},
        {"expect", expect}};
    std::printf("%s\n", out.dump(2).c_str());
    return passed ? 0 : 1;
  }
  for (size_t d = 0; d < run.devices.size(); ++d) {
    const DeviceRunSummary& s = run.devices[d];
    std::printf(
        "  device %zu %s: %d operators in %d stages (%d steps), %d copies in, %d out, %.2f MiB "
        "activations\n",
        d, Printable(s.name).c_str(), s.operators, s.stages, s.steps, s.received, s.sent,
        MiB(s.memory.allocated_bytes * cli.batch));
  }
  std::printf("copies between devices: %zu, %.3f MiB per run, %s\n", run.transfers.size(),
              MiB(copied),
              run.device_copies ? "peer copies enqueued between the GPUs' streams"
                                : "through host staging buffers");
  std::printf("measured end to end: median %.3f ms (min %.3f, max %.3f, spread %.3f; %d runs)\n",
              t.protocol.median_ms, t.min_ms, t.max_ms, t.protocol.spread_ms, t.repeats);
  if (info.predicted_ms) {
    std::printf("predicted (in the file): %.3f ms%s\n", *info.predicted_ms,
                info.simulated ? " (simulated)" : "");
  }
  if (cli.expected != nullptr) {
    std::printf("expect: %s (max |difference| %.3g; largest |reference| %.3g; tolerance %.0e)\n",
                expect["passed"].get<bool>() ? "PASSED" : "FAILED",
                expect["max_abs_diff"].get<double>(), expect["max_abs_reference"].get<double>(),
                cli.expect_tolerance);
  }
  if (cli.check) {
    std::printf("check: %s\n%s\n", check["passed"].get<bool>() ? "PASSED" : "FAILED",
                check.dump(2).c_str());
  }
  return passed ? 0 : 1;
}

}  // namespace ios::run
