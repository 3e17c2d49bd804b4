// A backend that stops answering: ios-worker --sim-hang-after N, for the
// tests of the worker's watchdog (docs/farm.md, "A hung measurement").
#pragma once

#include <chrono>
#include <memory>
#include <thread>

#include "devices/backend.h"

namespace ios::devices {

//! Wraps `inner`: its first `answered` measurements are `inner`'s, and every
//! later one never returns, as on a hung device.
class HangAfterBackend final : public Backend {
 public:
  HangAfterBackend(std::unique_ptr<Backend> inner, int answered)
      : inner_(std::move(inner)), left_(answered) {}
  const DeviceInfo& Device() const override { return inner_->Device(); }
  int Devices() const override { return inner_->Devices(); }
  std::vector<LinkFigures> Links() const override { return inner_->Links(); }
  LinkMeasurement MeasureLink(const LinkQuery& query) override {
    return inner_->MeasureLink(query);
  }
  MeasureResult Measure(const StageSpec& stage, int batch_size,
                        const MeasureSettings& settings) override {
    if (left_ > 0) {
      --left_;
      return inner_->Measure(stage, batch_size, settings);
    }
    for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
  }

 private:
  std::unique_ptr<Backend> inner_;
  int left_;
};

}  // namespace ios::devices
