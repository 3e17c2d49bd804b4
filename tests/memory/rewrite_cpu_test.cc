// Rewritten networks against their originals on the cpu device (oneDNN):
// the partial convolutions and their sums run as oneDNN primitives.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/zoo.h"
#include "devices/cpu/cpu_device.h"
#include "memory/rewrite.h"
#include "tests/memory/rewrite_testing.h"
#include "tests/testing/sanitizers.h"

namespace ios::memory {
namespace {

constexpr double kCpuTolerance = 1e-4;  // ios-run --check's

// One OpenMP thread: ctest runs two tests at once on CI's two cores, where
// a team of two waits on the other test (NASNet: 7x slower).
std::unique_ptr<exec::Device> OneThreadCpu() { return devices::MakeCpuDevice({.threads = 1}); }

TEST(RewriteCpuTest, EveryFormOfRandomSitesMatchesTheOriginalOnTheCpuDevice) {
  auto device = OneThreadCpu();
  for (RewriteRule rule :
       {RewriteRule::kChannelWise, RewriteRule::kKernelWise, RewriteRule::kSeparable}) {
    for (int seed = 0; seed < 10; ++seed) {
      for (bool through : {true, false}) {
        const Graph g = testing::RandomSiteGraph(static_cast<uint64_t>(seed), rule, through);
        const SiteSearch s = FindSites(g);
        ASSERT_EQ(s.sites.size(), 1u) << g.name;
        for (RewriteForm form : FormsOf(s.sites[0])) {
          testing::ExpectSameFunction(*device, g, Apply(g, s.sites[0], form), kCpuTolerance, 2,
                                      g.name + " " + ToString(rule) + " " + ToString(form));
        }
      }
    }
  }
}

// Every site of `graph` rewritten, the forms taken in turn (sum-all, chain,
// sum-all, ...), so one rewritten network holds each form at sites of every
// kind the model has.
Rewritten EverySite(const Graph& graph) {
  Rewritten all = Unchanged(graph);
  for (size_t i = 0;; ++i) {
    const SiteSearch s = FindSites(all.graph);
    if (s.sites.empty()) return all;
    const RewriteSite& site = s.sites.front();
    const std::vector<RewriteForm> forms = FormsOf(site);
    all = Apply(all, site, forms[i % forms.size()]);
  }
}

// Runs `original` (random weights) once and each rewritten network (weights
// derived from them) on the cpu device, expecting the original's output.
void ExpectSameFunctions(const Graph& original,
                         const std::vector<std::pair<std::string, Rewritten>>& rewrites) {
  auto device = OneThreadCpu();
  const exec::WeightStore weights = exec::WeightStore::Random(original, 7);
  const Shape& in = original.node(0).output;
  const std::vector<float> input = exec::SeededValues(static_cast<size_t>(in.c) * in.h * in.w, 11);
  const std::vector<float> want = testing::RunWhole(*device, original, weights, input, 1);
  for (const auto& [what, rewritten] : rewrites) {
    const std::vector<float> got = testing::RunWhole(
        *device, rewritten.graph, DeriveWeights(original, weights, rewritten), input, 1);
    const run::Comparison c = run::Compare(got, want);
    EXPECT_GT(c.max_abs_reference, 0) << what << ": the output is all zeros";
    EXPECT_TRUE(c.Within(kCpuTolerance)) << what << ": largest difference " << c.max_abs_diff
                                         << " against largest value " << c.max_abs_reference;
  }
}

TEST(RewriteCpuTest, DartsCellInEveryFormMatchesTheOriginalOnTheCpuDevice) {
  const Graph g = BuildZooModel("darts_cell");
  const SiteSearch s = FindSites(g);
  ASSERT_EQ(s.sites.size(), 1u);
  std::vector<std::pair<std::string, Rewritten>> rewrites;
  for (RewriteForm form : FormsOf(s.sites[0])) {
    rewrites.emplace_back(std::string("darts_cell ") + ToString(form), Apply(g, s.sites[0], form));
  }
  ASSERT_EQ(rewrites.size(), 2u);  // 4 terms: sum-all and chain
  ExpectSameFunctions(g, rewrites);
}

// NASNet and darts_imagenet run whole (NASNet about 10 s in Release): the
// plain build only. Under the sanitizers the random sites and darts_cell run
// the same rewriting and oneDNN code, on smaller networks (CI time).
TEST(RewriteCpuTest, DartsImagenetRewrittenMatchesTheOriginalOnTheCpuDevice) {
  if (::ios::testing::kSanitized) GTEST_SKIP() << "the plain build only (CI time)";
  const Graph g = BuildZooModel("darts_imagenet");
  // As kept where it lowers a part's peak under a Kahn order, and everywhere.
  const MemoryRewrite kept = RewriteForMemory(g, testing::KahnRegionPeaks);
  ASSERT_FALSE(kept.accepted.empty());
  ExpectSameFunctions(g, {{"darts_imagenet (kept)", kept.rewritten},
                          {"darts_imagenet (every site)", EverySite(g)}});
}

TEST(RewriteCpuTest, NasnetRewrittenEverywhereMatchesTheOriginalOnTheCpuDevice) {
  if (::ios::testing::kSanitized) GTEST_SKIP() << "the plain build only (CI time)";
  // Every site once: the forms a memory judge keeps are among those.
  const Graph g = BuildZooModel("nasnet");
  const Rewritten all = EverySite(g);
  ASSERT_EQ(FindSites(g).sites.size(), 21u);
  ExpectSameFunctions(g, {{"nasnet (every site)", all}});
}

}  // namespace
}  // namespace ios::memory
