#include "hios/reference_eval.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "hios/schedule.h"
#include "hios/sim_instance.h"
#include "tests/hios/sim_fixtures.h"
#include "tests/testing/paths.h"

namespace ios::hios {
namespace {

using fixtures::LoadAll;
const std::string& kDir = fixtures::kInstanceDir;

std::vector<OpId> IdOrder(int n) {
  std::vector<OpId> ids(static_cast<size_t>(n));
  std::iota(ids.begin(), ids.end(), 0);
  return ids;
}

TEST(ReferenceEvalTest, ReproducesTheUpstreamFiguresOnAll78Instances) {
  IOS_REQUIRE_FIXTURE(kDir);
  int completed = 0;
  for (const SimInstance* one : LoadAll(false)) {
    const SimInstance& sim = *one;
    ASSERT_TRUE(sim.upstream.has_value()) << sim.path;
    ++completed;
    const UpstreamResults& up = *sim.upstream;
    const std::vector<OpId> ids = IdOrder(sim.dag.ops());
    const auto& c = *sim.costs;
    EXPECT_NEAR(ReferenceIdOrderLatency(sim.dag, c, SingletonSchedule(4, up.lp_device_of, ids)),
                up.lp_inter_only, 1e-6)
        << sim.path;
    EXPECT_NEAR(ReferenceIdOrderLatency(sim.dag, c, SingletonSchedule(4, up.mr_device_of, ids)),
                up.mr_inter_only, 1e-6)
        << sim.path;
    EXPECT_NEAR(ReferenceIdOrderLatency(sim.dag, c, up.lp_stages), up.hios_lp, 1e-6) << sim.path;
    EXPECT_NEAR(ReferenceIdOrderLatency(sim.dag, c, up.mr_stages), up.hios_mr, 1e-6) << sim.path;
  }
  EXPECT_EQ(completed, 78);
}

TEST(ReferenceEvalTest, LowestIdListScheduleGivesTheCorrectedFiguresOfFormatMd) {
  IOS_REQUIRE_FIXTURE(kDir);
  double seq = 0, ios = 0, lp = 0, mr = 0;
  int n = 0;
  for (const SimInstance* one : LoadAll(false)) {
    const SimInstance& sim = *one;
    const UpstreamResults& up = *sim.upstream;
    std::vector<double> key(static_cast<size_t>(sim.dag.ops()));
    std::iota(key.begin(), key.end(), 0.0);
    const Timeline lp_t =
        Evaluate(sim.dag, *sim.costs, ListScheduleByKey(sim.dag, up.lp_stages, key));
    const Timeline mr_t =
        Evaluate(sim.dag, *sim.costs, ListScheduleByKey(sim.dag, up.mr_stages, key));
    ASSERT_TRUE(lp_t.acyclic && mr_t.acyclic) << sim.path;
    seq += up.sequential;
    ios += up.ios.value();
    lp += lp_t.latency_ms;
    mr += mr_t.latency_ms;
    ++n;
  }
  ASSERT_EQ(n, 78);
  EXPECT_NEAR(seq / n, 409.40, 0.01);
  EXPECT_NEAR(ios / n, 368.26, 0.01);
  EXPECT_NEAR(lp / n, 201.74, 0.01);
  EXPECT_NEAR(mr / n, 276.22, 0.01);
  EXPECT_NEAR(seq / lp, 2.03, 0.005);  // FORMAT.md's "2.03x over sequential"
  EXPECT_NEAR(ios / lp, 1.83, 0.005);
  EXPECT_NEAR(seq / mr, 1.48, 0.005);
}

TEST(ReferenceEvalTest, ThePriorityOrderGivesTheDesignsFiguresForTheReferenceMappings) {
  // hios-design.md §0: the reference's own mappings and stages, list
  // scheduled by descending p(v) instead of by id; pins Priorities.
  IOS_REQUIRE_FIXTURE(kDir);
  double lp_map = 0, mr_map = 0, lp_stages = 0, mr_stages = 0;
  int n = 0;
  for (const SimInstance* one : LoadAll(false)) {
    const SimInstance& sim = *one;
    const UpstreamResults& up = *sim.upstream;
    const std::vector<OpId> order = PriorityOrder(sim.dag, *sim.costs);
    std::vector<double> key = Priorities(sim.dag, *sim.costs);
    for (double& k : key) k = -k;
    auto latency = [&](const MultiSchedule& q) {
      const Timeline t = Evaluate(sim.dag, *sim.costs, q);
      EXPECT_TRUE(t.acyclic) << sim.path << ": " << t.problem;
      return t.latency_ms;
    };
    lp_map += latency(SingletonSchedule(sim.devices, up.lp_device_of, order));
    mr_map += latency(SingletonSchedule(sim.devices, up.mr_device_of, order));
    lp_stages += latency(ListScheduleByKey(sim.dag, up.lp_stages, key));
    mr_stages += latency(ListScheduleByKey(sim.dag, up.mr_stages, key));
    ++n;
  }
  ASSERT_EQ(n, 78);
  EXPECT_NEAR(lp_map / n, 140.31, 0.01);
  EXPECT_NEAR(mr_map / n, 126.21, 0.01);
  EXPECT_NEAR(lp_stages / n, 172.09, 0.01);
  EXPECT_NEAR(mr_stages / n, 213.91, 0.01);
}

// Asserts finish(u) + transfer <= start(v) on every edge, here and in CheckTimeline.
void ExpectEveryEdgeRespected(const SimInstance& sim, const MultiSchedule& q, const char* what) {
  const Timeline t = Evaluate(sim.dag, *sim.costs, q);
  ASSERT_TRUE(t.acyclic) << sim.path << " " << what << ": " << t.problem;
  std::vector<int> device_of(static_cast<size_t>(sim.dag.ops()), -1);
  for (int d = 0; d < static_cast<int>(q.stages.size()); ++d) {
    for (const auto& stage : q.stages[static_cast<size_t>(d)]) {
      for (OpId op : stage) device_of[static_cast<size_t>(op)] = d;
    }
  }
  for (EdgeId e = 0; e < sim.dag.edge_count(); ++e) {
    const auto u = static_cast<size_t>(sim.dag.edge(e).src);
    const auto v = static_cast<size_t>(sim.dag.edge(e).dst);
    ASSERT_GE(device_of[u], 0);
    const double wait =
        device_of[u] == device_of[v] ? 0.0 : sim.costs->TransferMs(e, device_of[u], device_of[v]);
    EXPECT_LE(t.finish_ms[u] + wait, t.start_ms[v] + 1e-9)
        << sim.path << " " << what << " edge " << e;
  }
  EXPECT_NO_THROW(CheckTimeline(sim.dag, *sim.costs, q, t)) << sim.path << " " << what;
}

TEST(ReferenceEvalTest, OurEvaluatorRespectsEveryEdgeOnEveryInstance) {
  IOS_REQUIRE_FIXTURE(kDir);
  int instances = 0;
  for (const SimInstance* one : LoadAll(true)) {
    const SimInstance& sim = *one;
    ++instances;
    const std::vector<OpId> order = PriorityOrder(sim.dag, *sim.costs);
    std::vector<int> round_robin(static_cast<size_t>(sim.dag.ops()));
    for (OpId v = 0; v < sim.dag.ops(); ++v) round_robin[static_cast<size_t>(v)] = v % sim.devices;
    ExpectEveryEdgeRespected(sim, SingletonSchedule(sim.devices, round_robin, order),
                             "round robin");
    if (!sim.upstream) continue;
    const UpstreamResults& up = *sim.upstream;
    ExpectEveryEdgeRespected(sim, SingletonSchedule(sim.devices, up.lp_device_of, order), "lp map");
    ExpectEveryEdgeRespected(sim, SingletonSchedule(sim.devices, up.mr_device_of, order), "mr map");
    std::vector<double> key = Priorities(sim.dag, *sim.costs);
    for (double& k : key) k = -k;
    ExpectEveryEdgeRespected(sim, ListScheduleByKey(sim.dag, up.lp_stages, key), "lp stages");
    ExpectEveryEdgeRespected(sim, ListScheduleByKey(sim.dag, up.mr_stages, key), "mr stages");
  }
  EXPECT_EQ(instances, 100);
}

TEST(ReferenceEvalTest, TheFixturesIdOrderStageListsAreReportedAsARealCycle) {
  // Replayed as sequences, the reference's per-GPU stage lists (in id order)
  // put some consumers before their producers: the evaluator must say so and
  // show a cycle whose every step is a device order or a data edge.
  IOS_REQUIRE_FIXTURE(kDir);
  for (const SimInstance* one : LoadAll(false)) {
    const SimInstance& sim = *one;
    for (const MultiSchedule* stages : {&sim.upstream->lp_stages, &sim.upstream->mr_stages}) {
      const MultiSchedule& q = *stages;
      const Timeline t = Evaluate(sim.dag, *sim.costs, q);
      ASSERT_FALSE(t.acyclic) << sim.path;
      ASSERT_GE(t.cycle.size(), 2u) << sim.path << ": " << t.problem;
      for (size_t i = 0; i < t.cycle.size(); ++i) {
        const StageRef from = t.cycle[i];
        const StageRef to = t.cycle[(i + 1) % t.cycle.size()];
        bool waits = from.device == to.device && from.index + 1 == to.index;
        for (OpId v : q.stages[static_cast<size_t>(to.device)][static_cast<size_t>(to.index)]) {
          for (EdgeId e : sim.dag.in_edges(v)) {
            const auto& ops =
                q.stages[static_cast<size_t>(from.device)][static_cast<size_t>(from.index)];
            waits |= std::find(ops.begin(), ops.end(), sim.dag.edge(e).src) != ops.end();
          }
        }
        EXPECT_TRUE(waits) << sim.path << ": " << t.problem;
      }
    }
  }
}

}  // namespace
}  // namespace ios::hios
