// What multi-device scheduling needs to know about time, and nothing about
// where it comes from (STYLE §5): the fixtures fill a table, the farm will
// measure stages and model links.
#pragma once

#include <functional>
#include <span>
#include <vector>

#include "hios/dag.h"

namespace ios::hios {

//! Times in milliseconds. Implementations must be safe for concurrent reads.
class Costs {
 public:
  virtual ~Costs() = default;
  virtual int devices() const = 0;
  //! Latency of `op` alone on `device`.
  virtual double OpMs(OpId op, int device) const = 0;
  //! Latency of `ops` run as one concurrent stage on `device` (one stream
  //! each); +inf when that stage cannot be priced. One op: OpMs.
  virtual double StageMs(std::span<const OpId> ops, int device) const = 0;
  //! Wait charged on edge `edge` when its source runs on `from` and its
  //! destination on `to`; callers never ask for from == to (that costs 0).
  virtual double TransferMs(EdgeId edge, int from, int to) const = 0;
  //! True when every device prices everything alike (and every link is the
  //! same), so a search may treat devices as interchangeable.
  virtual bool identical_devices() const { return false; }
};

//! Identical devices priced from vectors: the fixtures and the tests.
class TableCosts : public Costs {
 public:
  //! Prices a stage of two or more ops on a device.
  using StageFn = std::function<double(std::span<const OpId>, int device)>;

  //! op_ms[op], transfer_ms[edge]. Without `stage_fn` a concurrent stage
  //! costs the sum of its ops (no gain from concurrency).
  TableCosts(int devices, std::vector<double> op_ms, std::vector<double> transfer_ms,
             StageFn stage_fn = nullptr);

  int devices() const override { return devices_; }
  double OpMs(OpId op, int) const override { return op_ms_[static_cast<size_t>(op)]; }
  double StageMs(std::span<const OpId> ops, int device) const override;
  double TransferMs(EdgeId edge, int, int) const override {
    return transfer_ms_[static_cast<size_t>(edge)];
  }
  bool identical_devices() const override { return true; }

 private:
  int devices_;
  std::vector<double> op_ms_;
  std::vector<double> transfer_ms_;
  StageFn stage_fn_;
};

}  // namespace ios::hios
