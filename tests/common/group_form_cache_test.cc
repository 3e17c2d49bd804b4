// The keyer's cache of canonical group forms: found by operator set only,
// collisions of the hash told apart, and bounded (it starts again when full,
// and a keyer keeps giving the keys a fresh one gives).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/stage.h"
#include "common/zoo.h"

namespace ios {
namespace {

using detail::GroupForm;
using detail::GroupFormCache;

GroupForm Named(const std::string& text) {
  GroupForm form;
  form.signature = text;
  return form;
}

TEST(GroupFormCacheTest, FindsEachFormByItsOperatorsEvenWhenHashesCollide) {
  GroupFormCache cache;
  EXPECT_EQ(cache.Find({1, 2}, 7), nullptr);
  // Equal hashes (a collision forced on purpose), different operator sets.
  cache.Add({1, 2}, 7, Named("a"));
  cache.Add({1, 3}, 7, Named("b"));
  cache.Add({4, 5, 6}, 8, Named("c"));
  ASSERT_NE(cache.Find({1, 2}, 7), nullptr);
  EXPECT_EQ(cache.Find({1, 2}, 7)->signature, "a");
  EXPECT_EQ(cache.Find({1, 3}, 7)->signature, "b");
  EXPECT_EQ(cache.Find({4, 5, 6}, 8)->signature, "c");
  EXPECT_EQ(cache.Find({1, 4}, 7), nullptr);
  EXPECT_EQ(cache.Find({1, 2}, 9), nullptr) << "the hash is part of the look-up";
}

TEST(GroupFormCacheTest, StartsAgainOnlyWhenFullAndOnlyInMakeRoom) {
  GroupFormCache cache;
  const auto hash = [](NodeId a) { return static_cast<uint64_t>(a) * 0x9e3779b97f4a7c15ULL; };
  for (size_t i = 0; i < GroupFormCache::kMaxForms; ++i) {
    const NodeId a = static_cast<NodeId>(i);
    cache.Add({a, a + 1}, hash(a), Named(std::to_string(i)));
  }
  // Still all there until a stage asks for room.
  ASSERT_NE(cache.Find({0, 1}, hash(0)), nullptr);
  const NodeId last = static_cast<NodeId>(GroupFormCache::kMaxForms - 1);
  ASSERT_NE(cache.Find({last, last + 1}, hash(last)), nullptr);
  EXPECT_EQ(cache.Find({last, last + 1}, hash(last))->signature, std::to_string(last));
  cache.MakeRoom();
  EXPECT_EQ(cache.Find({0, 1}, hash(0)), nullptr);
  cache.Add({0, 1}, hash(0), Named("again"));
  EXPECT_EQ(cache.Find({0, 1}, hash(0))->signature, "again");
}

// A keyer meets every multi-operator group once and then reads its form:
// keying the same stages again, in another order and with another keyer,
// gives the same keys (MakeStageSpec builds a fresh keyer each time).
TEST(GroupFormCacheTest, KeysOfARepeatedWalkEqualFreshKeyersKeys) {
  const Graph g = BuildZooModel("inception_v3");
  StageKeyer keyer(g);
  std::vector<Stage> stages;
  for (const Block& block : g.blocks) {
    const std::vector<NodeId> ops = block.Operators();
    for (size_t i = 0; i + 2 < ops.size(); ++i) {
      stages.push_back({Strategy::kParallel, {{ops[i], ops[i + 1]}, {ops[i + 2]}}});
      stages.push_back({Strategy::kParallel, {{ops[i + 2]}, {ops[i], ops[i + 1]}}});
    }
  }
  ASSERT_GT(stages.size(), 100u);
  std::vector<std::string> first;
  for (const Stage& s : stages) first.push_back(keyer.Key(s));
  for (size_t i = stages.size(); i-- > 0;) {
    EXPECT_EQ(keyer.Key(stages[i]), first[i]) << "stage " << i;
    if (i % 97 == 0) {
      EXPECT_EQ(MakeStageSpec(g, stages[i]).Key(), first[i]) << "stage " << i;
    }
  }
}

}  // namespace
}  // namespace ios
