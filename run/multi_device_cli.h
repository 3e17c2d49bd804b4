// ios-run on a multi-device schedule file (ios-farm-multi/v1): opens the
// devices, runs and times the schedule (run/multi_device_run.h), checks it
// against single-device sequential execution and prints the report.
#pragma once

#include <chrono>
#include <span>
#include <string>
#include <vector>

#include "common/measurement.h"
#include "coordinator/multi_schedule.h"
#include "exec/weights.h"

namespace ios::run {

struct MultiCliOptions {
  std::string schedule_path;  // for the report
  std::string model_name;
  //! --devices (ExpandDeviceList's grammar); empty: the file's names.
  std::string devices;
  int batch = 1;
  MeasureSettings timing;
  std::chrono::milliseconds transfer_timeout{std::chrono::minutes(2)};
  bool check = false;
  double check_tolerance = 1e-4;
  bool json = false;  // the report as one JSON object, else text
  //! --expect: a reference output (null: none) and its tolerance.
  const std::vector<float>* expected = nullptr;
  std::string expect_file;
  double expect_tolerance = 1e-3;
};

//! The device kinds a multi-device run accepts: "cpu" (core groups as
//! devices), "reference" (naive loops, for small checks) and, where ios-run
//! is built with CUDA, "cuda" (peer copies between GPUs; "cuda:0;cuda:0"
//! runs the protocol on one GPU). Throws ios::Error naming the device
//! otherwise (sim models latencies only) or when no backend answers to it.
void CheckMultiRunDevice(const std::string& name);

//! Runs `file`'s schedule with `weights` on `input` (batch x input shape)
//! and prints the report on stdout. Returns ios-run's exit code: 0, or 1
//! when --check or --expect fails. Throws ios::Error on anything that stops
//! the run (a refused device, a device count that is not the file's, a
//! failed or stuck device).
int RunMultiDeviceCli(const MultiCliOptions& cli, const coordinator::LoadedMultiSchedule& file,
                      const exec::WeightStore& weights, std::span<const float> input);

}  // namespace ios::run
