// The reference code's own evaluation (SHUs-Lab/HIOS simulation), rebuilt
// only to compare with the figures it published (the fixtures'
// results_upstream_code). It is NOT precedence-correct: never schedule by it.
#pragma once

#include <vector>

#include "hios/costs.h"
#include "hios/dag.h"
#include "hios/schedule.h"

namespace ios::hios {

//! The reference's latency of q: stages visited in the order their first op
//! appears scanning ids 0..n-1 (not a topological order); a stage starts
//! after its device's ready time and, for each predecessor stage, that
//! stage's DEVICE's current ready time plus, across devices, the SUM of the
//! transfers of the edges between the two stages. Singletons of lp_gpu_of
//! give lp_inter_only; lp_stages_per_gpu as listed gives hios_lp.
double ReferenceIdOrderLatency(const Dag& dag, const Costs& costs, const MultiSchedule& q);

//! q's stages (their grouping and devices kept, their order dropped)
//! re-ordered by a list schedule: Kahn over the stages' data edges, the
//! ready stage with the smallest key (min over its ops of key[op]) first.
//! Throws ios::Error when the stages' data edges form a cycle.
MultiSchedule ListScheduleByKey(const Dag& dag, const MultiSchedule& q,
                                const std::vector<double>& key);

}  // namespace ios::hios
