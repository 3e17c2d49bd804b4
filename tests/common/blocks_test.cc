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

}  // namespace
}  // namespace ios
