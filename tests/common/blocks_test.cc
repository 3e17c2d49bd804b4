// FindBlocks: single-entry single-exit blocks cut where every path passes.
#include "common/blocks.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>

#include "common/error.h"
#include "common/zoo.h"
#include "common/zoo_builder.h"

namespace ios {
namespace {

using ::testing::HasSubstr;

TEST(FindBlocksTest, AChainIsOneBlockPerOperatorAndADiamondIsOneBlock) {
  zoo::GraphBuilder chain("chain", {4, 8, 8});
  chain.BeginBlock();
  NodeId a = chain.AddRelu("a", chain.Of(0));
  NodeId b = chain.AddRelu("b", chain.Of(a));
  chain.AddRelu("c", chain.Of(b));
  chain.EndBlock();
  const std::vector<Block> blocks = FindBlocks(chain.Finish());
  ASSERT_EQ(blocks.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(blocks[i].enter, i);
    EXPECT_TRUE(blocks[i].inner.empty());
    EXPECT_EQ(blocks[i].exit, i + 1);
  }

  zoo::GraphBuilder diamond("diamond", {4, 8, 8});
  diamond.BeginBlock();
  a = diamond.AddRelu("a", diamond.Of(0));
  b = diamond.AddRelu("b", diamond.Of(0));
  const NodeId c = diamond.AddRelu("c", diamond.Of(a));
  diamond.AddIdentity("d", diamond.Sum({c, b}));
  diamond.EndBlock();
  const std::vector<Block> one = FindBlocks(diamond.Finish());
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].enter, 0);
  EXPECT_EQ(one[0].inner, (std::vector<NodeId>{1, 2, 3}));
  EXPECT_EQ(one[0].exit, 4);
}

TEST(FindBlocksTest, ASecondSinkIsRefusedByName) {
  Graph g = [] {
    zoo::GraphBuilder b("two_sinks", {4, 8, 8});
    b.BeginBlock();
    b.AddRelu("a", b.Of(0));
    b.EndBlock();
    return b.Finish();
  }();
  Node extra = g.nodes[1];
  extra.name = "dangling";
  g.nodes.insert(g.nodes.begin() + 1, extra);  // read by nobody
  try {
    FindBlocks(g);
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("'dangling': nothing reads its output"));
  }
}

// On the zoo's hand-made blocks: every exit the zoo chose is a cut found
// here, and the blocks found pass the graph's own checks.
TEST(FindBlocksTest, FindsEveryBlockBoundaryOfTheZooModels) {
  for (const ZooEntry& entry : ZooModels()) {
    SCOPED_TRACE(entry.name);
    Graph g = BuildZooModel(entry.name);
    std::set<NodeId> found;
    const std::vector<Block> blocks = FindBlocks(g);
    for (const Block& b : blocks) found.insert(b.exit);
    for (const Block& b : g.blocks) EXPECT_TRUE(found.count(b.exit)) << g.nodes[b.exit].name;
    EXPECT_GE(blocks.size(), g.blocks.size());
    g.blocks = blocks;
    EXPECT_NO_THROW(InferShapes(g));
    EXPECT_NO_THROW(CheckSingleSinkBlocks(g));
  }
}

// Cells that each read the two cells before them (NASNet's shape) leave no
// cut vertex; NarrowParts cuts where only two tensors cross, after a cell's
// output, never inside a cell where three do.
TEST(NarrowPartsTest, CutsAfterCellOutputsIntoForwardOnlyRunsOfAtMostTheLimit) {
  zoo::GraphBuilder b("cells", {4, 8, 8});
  b.BeginBlock();
  std::vector<NodeId> outputs = {0, b.AddRelu("h1", b.Of(0))};
  std::set<NodeId> cell_outputs = {outputs[1]};
  for (int k = 2; k < 10; ++k) {
    const std::string cell = "cell" + std::to_string(k);
    const NodeId left = b.AddRelu(cell + "_a", b.Of(outputs[k - 1]));
    const NodeId right = b.AddRelu(cell + "_b", b.Of(outputs[k - 2]));
    const NodeId deeper = b.AddRelu(cell + "_c", b.Of(left));
    outputs.push_back(b.AddIdentity(cell + "_out", b.Sum({deeper, right})));
    cell_outputs.insert(outputs.back());
  }
  b.EndBlock();
  Graph g = b.Finish();
  g.blocks = FindBlocks(g);
  const Block& block = g.blocks.back();
  ASSERT_GT(block.inner.size(), 20u) << "the cells leave no cut vertex";

  const std::vector<std::vector<NodeId>> parts = NarrowParts(g, block, 8);
  std::vector<int> part_of(g.nodes.size(), -1);
  std::vector<NodeId> all;
  for (size_t p = 0; p < parts.size(); ++p) {
    EXPECT_LE(parts[p].size(), 8u);
    ASSERT_FALSE(parts[p].empty());
    if (p + 1 < parts.size()) {
      EXPECT_TRUE(cell_outputs.count(parts[p].back())) << g.nodes[parts[p].back()].name;
    }
    for (NodeId id : parts[p]) part_of[id] = static_cast<int>(p);
    all.insert(all.end(), parts[p].begin(), parts[p].end());
  }
  EXPECT_EQ(all, block.Operators());
  EXPECT_GE(parts.size(), 4u);
  for (NodeId id : all) {  // every edge between parts goes forward: acyclic
    for (const Term& term : g.nodes[id].inputs) {
      for (const Slice& slice : term) EXPECT_LE(part_of[slice.producer], part_of[id]);
    }
  }
}

// NASNet's one 374-operator block and DARTS's 246-operator block of cells
// get parts; the other zoo models' blocks stay whole for the search; the
// result is a valid block structure.
TEST(NarrowPartsTest, AutomaticBlocksGivePartsToBlocksOverTheThresholdOnly) {
  for (const ZooEntry& entry : ZooModels()) {
    SCOPED_TRACE(entry.name);
    Graph g = BuildZooModel(entry.name);
    SetAutomaticBlocks(g);
    bool any_parts = false;
    for (const Block& block : g.blocks) {
      const bool large = static_cast<int>(block.inner.size()) + 1 > kAutoPartsFrom;
      EXPECT_EQ(!block.parts.empty(), large);
      for (const auto& part : block.parts) {
        EXPECT_LE(part.size(), static_cast<size_t>(kAutoPartOperators));
      }
      any_parts |= large;
    }
    EXPECT_EQ(any_parts, entry.name == "nasnet" || entry.name == "darts_imagenet");
    EXPECT_NO_THROW(InferShapes(g));
    EXPECT_NO_THROW(CheckSingleSinkBlocks(g));
  }
}

}  // namespace
}  // namespace ios
