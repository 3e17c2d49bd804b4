#include "common/zoo.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/ios_json.h"

namespace ios {
namespace {

struct ZooCase {
  std::string name;
  int blocks;
  int operators;
};

const std::vector<ZooCase> kZooCases = {
    {"inception_v3", 13, 119},
    {"squeezenet", 12, 50},
    {"nasnet", 1, 374},
    {"randwire", 6, 120},
};

// Width of a set of operators: the largest set of them none of which
// depends on another, within the set (Dilworth: size minus a maximum
// matching in the transitive closure).
int Width(const Graph& graph, const std::vector<NodeId>& ops) {
  const std::set<NodeId> in_set(ops.begin(), ops.end());
  std::vector<std::set<NodeId>> ancestors(graph.nodes.size());
  for (NodeId v : ops) {  // topological order
    for (const Term& term : graph.node(v).inputs) {
      for (const Slice& s : term) {
        if (!in_set.count(s.producer)) continue;
        ancestors[v].insert(s.producer);
        ancestors[v].insert(ancestors[s.producer].begin(), ancestors[s.producer].end());
      }
    }
  }
  std::vector<NodeId> matched_from(graph.nodes.size(), -1);
  std::function<bool(NodeId, std::set<NodeId>&)> augment = [&](NodeId u, std::set<NodeId>& seen) {
    for (NodeId v : ops) {
      if (!ancestors[v].count(u) || !seen.insert(v).second) continue;
      if (matched_from[v] < 0 || augment(matched_from[v], seen)) {
        matched_from[v] = u;
        return true;
      }
    }
    return false;
  };
  int matching = 0;
  for (NodeId u : ops) {
    std::set<NodeId> seen;
    if (augment(u, seen)) ++matching;
  }
  return static_cast<int>(ops.size()) - matching;
}

// The generated models that follow (tests/common/generator_test.cc) have no
// reference export to compare with.
TEST(ZooTest, ListsTheFourNetworksOfThePaperFirst) {
  std::vector<std::string> names;
  for (const ZooEntry& entry : ZooModels()) {
    names.push_back(entry.name);
    EXPECT_FALSE(entry.description.empty()) << entry.name;
  }
  ASSERT_GE(names.size(), 4u);
  names.resize(4);
  EXPECT_EQ(names, (std::vector<std::string>{"inception_v3", "squeezenet", "nasnet", "randwire"}));
}

TEST(ZooTest, EachModelHasThePapersBlockAndOperatorCounts) {
  for (const ZooCase& c : kZooCases) {
    SCOPED_TRACE(c.name);
    const Graph graph = BuildZooModel(c.name);
    EXPECT_EQ(static_cast<int>(graph.blocks.size()), c.blocks);
    EXPECT_EQ(graph.OperatorCount(), c.operators);
    int in_blocks = 0;
    for (const Block& block : graph.blocks) in_blocks += static_cast<int>(block.Operators().size());
    EXPECT_EQ(in_blocks, c.operators) << "every operator belongs to exactly one block";
  }
}

TEST(ZooTest, EachModelHasShapesInferredAndUniqueNames) {
  for (const ZooCase& c : kZooCases) {
    SCOPED_TRACE(c.name);
    const Graph graph = BuildZooModel(c.name);
    std::set<std::string> names;
    for (const Node& node : graph.nodes) {
      EXPECT_TRUE(names.insert(node.name).second) << "duplicate name " << node.name;
      EXPECT_GT(node.output.c * node.output.h * node.output.w, 0) << node.name;
    }
    EXPECT_EQ(graph.nodes.back().output.h, 1) << "ends in a global pool";
  }
}

TEST(ZooTest, UnknownModelNameThrowsAnErrorListingTheKnownOnes) {
  try {
    BuildZooModel("resnet50");
    FAIL() << "expected ios::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("resnet50"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("inception_v3"), std::string::npos);
  }
}

TEST(ZooTest, NasNetIsCutIntoTwentyFivePartsAtCellOutputs) {
  const Graph graph = BuildZooModel("nasnet");
  ASSERT_EQ(graph.blocks.size(), 1u);
  const Block& block = graph.blocks[0];
  ASSERT_EQ(block.parts.size(), 25u);

  std::vector<NodeId> concatenated;
  for (const auto& part : block.parts) {
    EXPECT_FALSE(part.empty());
    concatenated.insert(concatenated.end(), part.begin(), part.end());
  }
  EXPECT_EQ(concatenated, block.Operators()) << "parts cover every operator once, in order";

  std::vector<int> sizes;
  for (const auto& part : block.parts) sizes.push_back(static_cast<int>(part.size()));
  const std::vector<int> expected_sizes = {1,  18, 21, 18, 16, 16, 16, 16, 16, 19, 18, 16, 16,
                                           16, 16, 16, 19, 18, 16, 16, 16, 16, 16, 1,  1};
  EXPECT_EQ(sizes, expected_sizes) << "stem conv, 2 stem cells, 18 normal + 2 reduction cells, "
                                      "relu, global pool";
}

TEST(ZooTest, NasNetWidestPartsMatchTheIosPapersTableOne) {
  // Table 1 of the IOS paper gives NASNet's hardest part as n = 18, d = 8:
  // the first cell of each stack. (The stem cell 1 part has more operators,
  // 21, but is narrower, d = 7.)
  const Graph graph = BuildZooModel("nasnet");
  int max_width = 0, max_n_at_max_width = 0;
  for (const auto& part : graph.blocks.at(0).parts) {
    const int width = Width(graph, part);
    const int n = static_cast<int>(part.size());
    if (width > max_width) {
      max_width = width;
      max_n_at_max_width = 0;
    }
    if (width == max_width) max_n_at_max_width = std::max(max_n_at_max_width, n);
  }
  EXPECT_EQ(max_width, 8);
  EXPECT_EQ(max_n_at_max_width, 18);
}

TEST(ZooTest, EachModelIsStructurallyIdenticalToTheReferenceExport) {
  const std::string dir = IOS_SHARED_DIR "/fixtures/ios-reference/models/";
  if (!std::filesystem::exists(dir)) {
    GTEST_SKIP() << "../shared fixtures absent: " << dir;
  }
  for (const ZooCase& c : kZooCases) {
    SCOPED_TRACE(c.name);
    const std::string path = dir + c.name + ".json";
    ASSERT_TRUE(std::filesystem::exists(path)) << path;
    const Graph reference = LoadIosJson(path).graph;
    Graph built = BuildZooModel(c.name);
    // The reference format has no parts; they are checked above.
    for (Block& block : built.blocks) block.parts.clear();
    std::string difference;
    EXPECT_TRUE(StructurallyEqual(built, reference, &difference)) << difference;
  }
}

}  // namespace
}  // namespace ios
