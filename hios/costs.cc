#include "hios/costs.h"

#include <string>
#include <utility>

#include "common/error.h"

namespace ios::hios {

TableCosts::TableCosts(int devices, std::vector<double> op_ms, std::vector<double> transfer_ms,
                       StageFn stage_fn)
    : devices_(devices),
      op_ms_(std::move(op_ms)),
      transfer_ms_(std::move(transfer_ms)),
      stage_fn_(std::move(stage_fn)) {
  if (devices_ < 1) {
    throw Error("hios costs: expected at least one device, found " + std::to_string(devices_));
  }
}

double TableCosts::StageMs(std::span<const OpId> ops, int device) const {
  if (ops.size() == 1) return OpMs(ops[0], device);
  if (stage_fn_) return stage_fn_(ops, device);
  double sum = 0;
  for (OpId op : ops) sum += OpMs(op, device);
  return sum;
}

}  // namespace ios::hios
