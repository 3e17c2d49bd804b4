// Rewritten networks against their originals on the cpu device (oneDNN):
// the partial convolutions and their sums run as oneDNN primitives.
#include <gtest/gtest.h>

#include <string>

#include "common/zoo.h"
#include "devices/cpu/cpu_device.h"
#include "memory/rewrite.h"
#include "tests/memory/rewrite_testing.h"

namespace ios::memory {
namespace {

constexpr double kCpuTolerance = 1e-4;  // ios-run --check's

TEST(RewriteCpuTest, EveryFormOfRandomSitesMatchesTheOriginalOnTheCpuDevice) {
  auto device = devices::MakeCpuDevice();
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

// The models rewriting is for, rewritten where it lowers a part's peak
// under a Kahn order, and everywhere in the chain form.
void CheckModel(const std::string& name) {
  const Graph g = BuildZooModel(name);
  auto device = devices::MakeCpuDevice();
  const MemoryRewrite kept = RewriteForMemory(g, testing::KahnRegionPeaks);
  ASSERT_FALSE(kept.accepted.empty()) << name;
  testing::ExpectSameFunction(*device, g, kept.rewritten, kCpuTolerance, 1, name + " (kept)");
  Rewritten all = Unchanged(g);
  for (;;) {
    const SiteSearch s = FindSites(all.graph);
    if (s.sites.empty()) break;
    const RewriteSite& site = s.sites.front();
    all = Apply(all, site, FormsOf(site).back());
  }
  testing::ExpectSameFunction(*device, g, all, kCpuTolerance, 1, name + " (every site)");
}

TEST(RewriteCpuTest, DartsImagenetRewrittenMatchesTheOriginalOnTheCpuDevice) {
  CheckModel("darts_imagenet");
}

TEST(RewriteCpuTest, NasnetRewrittenMatchesTheOriginalOnTheCpuDevice) { CheckModel("nasnet"); }

}  // namespace
}  // namespace ios::memory
