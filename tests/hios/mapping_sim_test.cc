// HIOS-LP and HIOS-MR mappings on every fixture instance, judged by THE
// evaluator, against the figures of the paper and of the reference.
#include <gtest/gtest.h>

#include <cstdio>

#include "hios/lp.h"
#include "hios/mr.h"
#include "hios/schedule.h"
#include "tests/hios/sim_fixtures.h"
#include "tests/testing/paths.h"

namespace ios::hios {
namespace {

using fixtures::LoadAll;

// The latency of a mapping as singletons in priority order; asserts it is
// a schedule that respects every edge and maps every op.
double Checked(const SimInstance& sim, const std::vector<int>& device_of, const char* what) {
  for (size_t op = 0; op < device_of.size(); ++op) {
    EXPECT_GE(device_of[op], 0) << sim.path << " " << what << ": operator " << op << " unmapped";
  }
  const MultiSchedule q =
      SingletonSchedule(sim.devices, device_of, PriorityOrder(sim.dag, *sim.costs));
  const Timeline t = Evaluate(sim.dag, *sim.costs, q);
  EXPECT_TRUE(t.acyclic) << sim.path << " " << what << ": " << t.problem;
  if (t.acyclic) {
    EXPECT_NO_THROW(CheckTimeline(sim.dag, *sim.costs, q, t)) << sim.path;
  }
  return t.latency_ms;
}

TEST(MappingSimTest, LpAndMrMapEveryOperatorOfAll100InstancesToAValidSchedule) {
  IOS_REQUIRE_FIXTURE(fixtures::kInstanceDir);
  int n = 0;
  for (const SimInstance* sim : LoadAll(true)) {
    Checked(*sim, MapLongestPaths(sim->dag, *sim->costs), "LP");
    const RecordedMapping mr = MapByRecording(sim->dag, *sim->costs);
    EXPECT_NEAR(Checked(*sim, mr.device_of, "MR"), mr.makespan_ms, 1e-9) << sim->path;
    ++n;
  }
  EXPECT_EQ(n, 100);
}

TEST(MappingSimTest, LpMappingAloneMeetsThePapersSpeedUpsOnThe78) {
  // Issue 23's goal for HIOS-LP: >= 2.01x over sequential and >= 1.81x over
  // single-GPU IOS, ratios of means as the reference's figures are (its own
  // mappings re-evaluated correctly: 2.03x and 1.83x).
  IOS_REQUIRE_FIXTURE(fixtures::kInstanceDir);
  double seq = 0, ios = 0, lp = 0, mr = 0;
  int n = 0;
  for (const SimInstance* sim : LoadAll(false)) {
    seq += sim->upstream->sequential;
    ios += *sim->upstream->ios;
    lp += Checked(*sim, MapLongestPaths(sim->dag, *sim->costs), "LP");
    mr += MapByRecording(sim->dag, *sim->costs).makespan_ms;
    ++n;
  }
  ASSERT_EQ(n, 78);
  std::printf(
      "mean over 78: sequential %.2f  IOS %.2f  LP %.2f (%.2fx, %.2fx)  MR %.2f (%.2fx, %.2fx) "
      "ms\n",
      seq / n, ios / n, lp / n, seq / lp, ios / lp, mr / n, seq / mr, ios / mr);
  EXPECT_GE(seq / lp, 2.01);
  EXPECT_GE(ios / lp, 1.81);
}

}  // namespace
}  // namespace ios::hios
