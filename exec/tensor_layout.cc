#include "exec/tensor_layout.h"

#include <algorithm>

#include "common/error.h"

namespace ios::exec {

MemoryPlan PlanSlots(const TensorLayout& layout, const std::vector<int>& stage_of, int stages) {
  const int end = stages;
  const size_t buffers = layout.buffers.size();
  std::vector<int> first(buffers, end), last(buffers, -1);
  for (size_t b = 0; b < buffers; ++b) {
    const LayoutBuffer& buffer = layout.buffers[b];
    for (NodeId id : buffer.touch) {
      const int s = stage_of.at(static_cast<size_t>(id));
      if (s < 0)
        throw Error("memory plan: buffer " + std::to_string(b) + " is touched by node #" +
                    std::to_string(id) + ", which is in no stage");
      first[b] = std::min(first[b], s);
      last[b] = std::max(last[b], s);
    }
    if (buffer.pinned) first[b] = 0;
    if (buffer.pinned || buffer.to_end) last[b] = end;
  }
  // First fit by start: a slot is free once its last occupant's last
  // reader's stage has ended (lanes of a stage run concurrently).
  std::vector<size_t> order(buffers);
  for (size_t b = 0; b < buffers; ++b) order[b] = b;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return first[a] < first[b]; });
  MemoryPlan plan;
  plan.slot.assign(buffers, -1);
  std::vector<int> slot_last;
  for (size_t b : order) {
    const int64_t elements = layout.buffers[b].elements;
    size_t slot = 0;
    while (slot < slot_last.size() && slot_last[slot] >= first[b]) ++slot;
    if (slot == slot_last.size()) {
      slot_last.push_back(-1);
      plan.slot_elements.push_back(0);
    }
    slot_last[slot] = last[b];
    plan.slot_elements[slot] = std::max(plan.slot_elements[slot], elements);
    plan.slot[b] = static_cast<int>(slot);
  }
  MemoryPlanSummary& m = plan.summary;
  m.buffers = static_cast<int>(buffers);
  m.slots = static_cast<int>(plan.slot_elements.size());
  for (int64_t elements : plan.slot_elements) m.allocated_bytes += 4 * elements;
  m.concat_views = layout.concat_views;
  for (int s = 0; s < end; ++s) {
    int64_t bytes = 0;
    for (size_t b = 0; b < buffers; ++b) {
      if (first[b] <= s && s <= last[b]) bytes += 4 * layout.buffers[b].elements;
    }
    m.peak_live_bytes = std::max(m.peak_live_bytes, bytes);
  }
  return plan;
}

}  // namespace ios::exec
