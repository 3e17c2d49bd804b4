// Narrow cuts: both halves topological, the first inside its window, the
// cut between branches rather than through them; blocks cut to size.
#include "coordinator/part_cut.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>

#include "coordinator/search.h"
#include "tests/coordinator/wide_models.h"

namespace ios::coordinator {
namespace {

using testing::WideBlock;

// Every op of `ops` once over `pieces`, each piece topological, and no
// piece reading a later one.
void ExpectOrderedPartition(const Graph& g, const std::vector<NodeId>& ops,
                            const std::vector<std::vector<NodeId>>& pieces) {
  std::vector<int> piece_of(g.nodes.size(), -1), position(g.nodes.size(), -1);
  size_t total = 0;
  for (size_t p = 0; p < pieces.size(); ++p) {
    for (size_t i = 0; i < pieces[p].size(); ++i) {
      const NodeId id = pieces[p][i];
      ASSERT_EQ(piece_of[id], -1) << g.node(id).name << " in two pieces";
      piece_of[id] = static_cast<int>(p);
      position[id] = static_cast<int>(i);
      ++total;
    }
  }
  ASSERT_EQ(total, ops.size());
  for (NodeId id : ops) {
    ASSERT_NE(piece_of[id], -1) << g.node(id).name << " in no piece";
    for (const Term& term : g.node(id).inputs) {
      for (const Slice& s : term) {
        if (piece_of[s.producer] < 0) continue;  // outside ops
        EXPECT_TRUE(piece_of[s.producer] < piece_of[id] ||
                    (piece_of[s.producer] == piece_of[id] && position[s.producer] < position[id]))
            << g.node(id).name << " before its producer " << g.node(s.producer).name;
      }
    }
  }
}

TEST(PartCutTest, CutsAnAntichainAtTheTarget) {
  const Graph g = WideBlock(16);
  std::vector<NodeId> convs = g.blocks[0].inner;
  const PartCut cut = NarrowCut(g, convs, 4, 12, 8);
  EXPECT_EQ(cut.first.size(), 8u);
  EXPECT_EQ(cut.crossing, 0);
  ExpectOrderedPartition(g, convs, {cut.first, cut.second});
}

// Two layers listed layer by layer (l0_c0..l0_c7, l1_c0..l1_c7): cutting in
// node order would leave 8 tensors crossing; a cut between branches none.
TEST(PartCutTest, CutsBetweenBranchesNotThroughThem) {
  const Graph g = WideBlock(8, 2);
  const std::vector<NodeId> convs = g.blocks[0].inner;
  const PartCut cut = NarrowCut(g, convs, 4, 12, 8);
  EXPECT_EQ(cut.crossing, 0);
  EXPECT_EQ(cut.first.size(), 8u);
  ExpectOrderedPartition(g, convs, {cut.first, cut.second});
}

TEST(PartCutTest, SplitToSizeMakesTheFewestPiecesWithinTheLimit) {
  for (int width : {1, 7, 49, 50, 51, 120}) {
    const Graph g = WideBlock(width, 2);
    const std::vector<NodeId> ops = g.blocks[0].Operators();
    const auto pieces = SplitToSize(g, ops, 50);
    EXPECT_EQ(pieces.size(), (ops.size() + 49) / 50) << width;
    for (const auto& piece : pieces) EXPECT_LE(piece.size(), 50u) << width;
    ExpectOrderedPartition(g, ops, pieces);
  }
}

// Explicit parts larger than the part size (or than the DP's 64-operator
// limit) are cut like blocks, not handed to the DP whole.
TEST(PartCutTest, PartsOfCutsExplicitPartsLargerThanTheLimit) {
  Graph g = WideBlock(70);
  const std::vector<NodeId> ops = g.blocks[0].Operators();
  g.blocks[0].parts = {std::vector<NodeId>(ops.begin(), ops.begin() + 3),
                       std::vector<NodeId>(ops.begin() + 3, ops.end())};
  const auto parts = PartsOf(g, g.blocks[0], 50);
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_EQ(parts[0].size(), 3u);
  for (const auto& part : parts) EXPECT_LE(part.size(), 50u);
  ExpectOrderedPartition(g, ops, parts);
}

TEST(PartCutTest, RandomDagsGiveOrderedPartitionsInsideTheWindow) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 50; ++trial) {
    const int width = 2 + static_cast<int>(rng() % 6), depth = 1 + static_cast<int>(rng() % 4);
    Graph g = WideBlock(width, depth);
    // Extra edges: later ops also read a random earlier op (summed).
    for (NodeId v = 1 + width; v < static_cast<NodeId>(g.nodes.size()) - 1; ++v) {
      if (rng() % 2)
        g.nodes[v].inputs[0].push_back({1 + static_cast<NodeId>(rng() % (v - 1)), 0, 8});
    }
    const std::vector<NodeId> ops = g.blocks[0].Operators();
    const size_t n = ops.size(), lo = 1 + rng() % (n / 2), hi = lo + rng() % (n - lo);
    const PartCut cut = NarrowCut(g, ops, lo, hi, (lo + hi) / 2);
    EXPECT_GE(cut.first.size(), lo);
    EXPECT_LE(cut.first.size(), hi);
    ExpectOrderedPartition(g, ops, {cut.first, cut.second});
  }
}

}  // namespace
}  // namespace ios::coordinator
