// Helpers for the farm's tests that run a real worker: an ios::worker::Worker
// on a thread of its own, and stages no worker accepts.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <exception>
#include <memory>
#include <stop_token>
#include <string>
#include <thread>

#include "devices/registry.h"
#include "net/context.h"
#include "tests/farm/farm_testing.h"
#include "worker/farm_worker.h"

namespace ios::farm_testing {

// A Worker on its own thread, stopped and joined when the object goes.
class WorkerThread {
 public:
  WorkerThread(net::Context& context, const std::string& endpoint, const std::string& backend,
               std::chrono::milliseconds heartbeat = 50ms, double sim_delay_ms = 0) {
    worker::WorkerOptions options;
    options.endpoint = endpoint;
    options.worker_id = "thread-" + backend;
    options.heartbeat = heartbeat;
    options.reconnect_min = 20ms;
    options.reconnect_max = 100ms;
    devices::BackendOptions backend_options;
    backend_options.sim_delay_ms = sim_delay_ms;
    worker_ = std::make_unique<worker::Worker>(
        context, devices::BuiltinRegistry().OpenBackend(backend, backend_options), options);
    thread_ = std::jthread([this](std::stop_token stop) {
      try {
        worker_->Run(stop);
      } catch (const std::exception& e) {
        ADD_FAILURE() << "worker thread: " << e.what();
      }
    });
  }
  ~WorkerThread() {
    thread_.request_stop();
    thread_.join();
  }
  const worker::Worker& worker() const { return *worker_; }

 private:
  std::unique_ptr<worker::Worker> worker_;
  std::jthread thread_;
};

// The first single-convolution stage of `stages`.
inline StageSpec OneConvStage(const ZooStages& stages) {
  for (const StageSpec& spec : stages.specs) {
    if (spec.groups.size() == 1 && spec.groups[0].size() == 1 &&
        spec.groups[0][0].op.kind == OpKind::kConv && spec.groups[0][0].inputs.size() == 1) {
      return spec;
    }
  }
  ADD_FAILURE() << "no single-convolution stage";
  return stages.specs.at(0);
}

// Stages no worker accepts: each beyond one of the wire protocol's budgets.
struct BeyondTheLimits {
  const char* name;
  void (*edit)(StageSpec&);
  const char* expected;  // in the error message
};

inline const BeyondTheLimits kBeyondTheLimits[] = {
    {"65,537 output channels",
     [](StageSpec& s) {
       s.groups[0][0].op.conv.out_channels = 65537;
       s.groups[0][0].output.c = 65537;
     },
     "outChannels: 65537 out of range"},
    {"1,025 terms",
     [](StageSpec& s) { s.groups[0][0].inputs.resize(1025, s.groups[0][0].inputs[0]); },
     "1025 entries, at most 1024"},
    {"65 sequential steps",
     [](StageSpec& s) {
       OpParams step;
       step.kind = OpKind::kActivation;
       step.act = Activation::kRelu;
       s.groups[0][0].op.kind = OpKind::kSequential;
       s.groups[0][0].op.chain.assign(65, step);
     },
     "65 entries, at most 64"},
};

}  // namespace ios::farm_testing
