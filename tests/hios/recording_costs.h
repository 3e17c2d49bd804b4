// A Costs that forwards to another and remembers every multi-op stage it was
// asked to price: the window tests check those against WindowCandidates.
#pragma once

#include <span>
#include <vector>

#include "hios/costs.h"

namespace ios::hios {

class RecordingCosts : public Costs {
 public:
  explicit RecordingCosts(const Costs& inner) : inner_(inner) {}
  int devices() const override { return inner_.devices(); }
  double OpMs(OpId op, int device) const override { return inner_.OpMs(op, device); }
  double StageMs(std::span<const OpId> ops, int device) const override {
    if (ops.size() > 1) asked.emplace_back(ops.begin(), ops.end());
    return inner_.StageMs(ops, device);
  }
  double TransferMs(EdgeId edge, int from, int to) const override {
    return inner_.TransferMs(edge, from, to);
  }
  mutable std::vector<std::vector<OpId>> asked;

 private:
  const Costs& inner_;
};

}  // namespace ios::hios
