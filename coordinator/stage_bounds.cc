#include "coordinator/stage_bounds.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <unordered_map>

#include "common/error.h"
#include "common/stage.h"
#include "coordinator/search.h"

namespace ios::coordinator {

StageBounds::StageBounds(const SearchPlan& plan) {
  std::unordered_map<NodeId, int> singleton_of;
  for (const BlockSchedule& block : plan.sequential) {
    for (const auto& [stage, id] : block) {
      singleton_of[stage.groups.front().front()] = id;
      if (std::find(singletons_.begin(), singletons_.end(), id) == singletons_.end()) {
        singletons_.push_back(id);
      }
    }
  }
  stages_.resize(plan.stage_count());
  group_begin_.push_back(0);
  for (size_t id = 0; id < plan.stage_count(); ++id) {
    const Stage stage = plan.StageOf(static_cast<int>(id));
    StageShape& shape = stages_[id];
    shape.merge = stage.strategy == Strategy::kMerge;
    shape.operators = stage.OperatorCount();
    shape.first_group = static_cast<uint32_t>(group_begin_.size() - 1);
    if (!shape.merge) {
      for (const std::vector<NodeId>& group : stage.groups) {
        for (NodeId op : group) {
          const auto it = singleton_of.find(op);
          members_.push_back(it == singleton_of.end() ? -1 : it->second);
        }
        group_begin_.push_back(static_cast<uint32_t>(members_.size()));
      }
    }
    shape.group_end = static_cast<uint32_t>(group_begin_.size() - 1);
  }
}

double StageBounds::Overhead(const std::vector<double>& latency) const {
  double smallest = std::numeric_limits<double>::infinity();
  for (int id : singletons_) {
    if (std::isfinite(latency.at(id))) smallest = std::min(smallest, latency[id]);
  }
  return std::isfinite(smallest) ? smallest : 0.0;
}

double StageBounds::LowerBound(int id, const std::vector<double>& latency,
                               const Model& model) const {
  const StageShape& shape = stages_.at(id);
  // One kernel for a merged convolution; at least one per operator else.
  double bound = model.serial_op_ms * (shape.merge ? 1 : shape.operators);
  double total = 0;  // over every group
  int total_counted = 0;
  double work = model.stage_fixed_ms;  // the device's busy time, all groups together
  for (uint32_t g = shape.first_group; g < shape.group_end; ++g) {
    double sum = 0, largest = 0;
    int counted = 0;
    for (uint32_t m = group_begin_[g]; m < group_begin_[g + 1]; ++m) {
      if (members_[m] < 0) continue;
      if (!model.work_ms.empty()) work += model.work_ms.at(members_[m]);
      const double t = latency.at(members_[m]);
      if (!std::isfinite(t)) continue;
      sum += t;
      largest = std::max(largest, t);
      ++counted;
    }
    if (counted == 0) continue;
    bound = std::max(bound, largest);
    if (model.chain_discount) bound = std::max(bound, sum - (counted - 1) * model.overhead_ms);
    total += sum;
    total_counted += counted;
  }
  // Every operator's work is known, measured or not; but a rounding in the
  // sum must not lift the bound over the device's own figure.
  if (!model.work_ms.empty() && !shape.merge) bound = std::max(bound, work * (1 - 1e-9));
  if (model.chain_discount && model.max_parallelism > 0 && total_counted > 0) {
    bound = std::max(bound, (total - (total_counted - 1) * model.overhead_ms) /
                                static_cast<double>(model.max_parallelism));
  }
  return std::max(0.0, (1 - model.margin) * bound);
}

StageBounds::Model MakeBoundModel(const Graph& graph, const SearchPlan& plan,
                                  const StageBounds& bounds, const std::vector<double>& latency,
                                  const devices::StageCostFacts& facts,
                                  const SearchOptions& options) {
  StageBounds::Model model;
  model.overhead_ms = bounds.Overhead(latency);
  model.serial_op_ms = facts.serial_op_ms;
  model.max_parallelism = facts.max_parallelism;
  model.chain_discount = facts.chain_discount_sound;
  model.margin = options.bound_margin;
  if (facts.operator_work_ms) {
    model.work_ms.assign(plan.stage_count(), 0.0);
    model.stage_fixed_ms = facts.stage_fixed_ms;
    StageKeyer keyer(graph);
    for (int id : bounds.singletons()) {
      try {
        model.work_ms[id] =
            facts.operator_work_ms(keyer.Spec(plan.StageOf(id)), options.batch_size);
      } catch (const Error& e) {
        // Unknown work counts as none: the bound stays a lower one.
        spdlog::debug("lazy measurement: no work figure for stage {}: {}", id, e.what());
      }
    }
  }
  return model;
}

}  // namespace ios::coordinator
