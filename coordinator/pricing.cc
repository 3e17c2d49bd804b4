#include "coordinator/pricing.h"

#include <utility>

namespace ios::coordinator {

PricedSchedule PriceBlocks(const Graph& graph, const std::vector<std::vector<Stage>>& blocks,
                           const SearchOptions& options, db::ProfileStore& store,
                           Measurer& measurer,
                           const std::function<void(const MeasureProgress&)>& progress) {
  // A plan of the schedule's stages alone: interning dedupes a stage that
  // recurs (Inception V3's repeated blocks), so it is looked up once.
  SearchPlan plan;
  StageKeyer keyer(graph);
  std::vector<BlockSchedule> ids;
  ids.reserve(blocks.size());
  for (const std::vector<Stage>& stages : blocks) {
    BlockSchedule block;
    block.reserve(stages.size());
    for (const Stage& s : stages) block.emplace_back(s, plan.Intern(keyer, s));
    ids.push_back(std::move(block));
  }
  PricedSchedule priced;
  priced.table = MeasureStages(graph, plan, store, measurer, options, progress);
  priced.schedule = PriceSchedule(ids, priced.table.latency_ms);
  priced.distinct_stages = plan.stage_count();
  priced.plan = std::move(plan);
  return priced;
}

std::vector<std::vector<Stage>> BlockStagesOf(const Schedule& schedule) {
  std::vector<std::vector<Stage>> blocks;
  blocks.reserve(schedule.blocks.size());
  for (const auto& block : schedule.blocks) {
    std::vector<Stage>& stages = blocks.emplace_back();
    stages.reserve(block.size());
    for (const ScheduledStage& s : block) stages.push_back(s.stage);
  }
  return blocks;
}

}  // namespace ios::coordinator
