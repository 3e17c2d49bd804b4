// The generated networks of the zoo (the Serenity paper's benchmark kinds):
// Watts-Strogatz graphs, RandWire for CIFAR, DARTS; and the model-size count
// their calibration rests on.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "common/blocks.h"
#include "common/error.h"
#include "common/ios_json.h"
#include "common/model_size.h"
#include "common/model_source.h"
#include "common/watts_strogatz.h"
#include "common/zoo.h"
#include "common/zoo_darts.h"
#include "common/zoo_randwire.h"

namespace ios {
namespace {

using ::testing::HasSubstr;
using zoo::WattsStrogatz;
using zoo::WsGraph;

// ------------------------------------------------------------ Watts-Strogatz

TEST(GeneratorTest, WattsStrogatzKeepsNTimesKOver2EdgesAndIsDeterministicPerSeed) {
  struct Case {
    int n, k;
    double p;
  };
  for (const Case& c : {Case{32, 4, 0.75}, Case{16, 4, 0.75}, Case{10, 6, 1.0}, Case{5, 4, 1.0},
                        Case{64, 8, 0.25}, Case{3, 2, 0.5}}) {
    for (uint64_t seed : {0ull, 1ull, 7ull, 123456789ull}) {
      SCOPED_TRACE("n=" + std::to_string(c.n) + " k=" + std::to_string(c.k) +
                   " p=" + std::to_string(c.p) + " seed=" + std::to_string(seed));
      const WsGraph g = WattsStrogatz(c.n, c.k, c.p, seed);
      EXPECT_EQ(g.num_nodes, c.n);
      EXPECT_EQ(static_cast<int>(g.edges.size()), c.n * c.k / 2);
      std::set<std::pair<int, int>> distinct;
      for (const auto& [u, v] : g.edges) {
        EXPECT_LT(u, v) << "an edge is (smaller, larger): no self-loop";
        EXPECT_GE(u, 0);
        EXPECT_LT(v, c.n);
        distinct.insert({u, v});
      }
      EXPECT_EQ(distinct.size(), g.edges.size()) << "no duplicate edge";
      EXPECT_EQ(WattsStrogatz(c.n, c.k, c.p, seed).edges, g.edges) << "same seed, same graph";
    }
  }
  // Different seeds draw different graphs (at p = 0.75 on 32 nodes two equal
  // draws have probability far below 1e-9).
  std::set<std::vector<std::pair<int, int>>> draws;
  for (uint64_t seed = 0; seed < 20; ++seed) draws.insert(WattsStrogatz(32, 4, 0.75, seed).edges);
  EXPECT_EQ(draws.size(), 20u);
}

TEST(GeneratorTest, WattsStrogatzWithoutRewiringIsTheRingLattice) {
  const WsGraph g = WattsStrogatz(8, 4, 0.0, 42);
  const std::vector<std::pair<int, int>> ring = {{0, 1}, {0, 2}, {0, 6}, {0, 7}, {1, 2}, {1, 3},
                                                 {1, 7}, {2, 3}, {2, 4}, {3, 4}, {3, 5}, {4, 5},
                                                 {4, 6}, {5, 6}, {5, 7}, {6, 7}};
  EXPECT_EQ(g.edges, ring);
}

TEST(GeneratorTest, WattsStrogatzRefusesArgumentsWithoutAGraphNamingThem) {
  struct Case {
    int n, k;
    double p;
    const char* says;
  };
  for (const Case& c : {Case{1, 0, 0.5, "n must be at least 2"}, Case{8, 3, 0.5, "k must be even"},
                        Case{8, 8, 0.5, "between 2 and n-1"}, Case{8, 0, 0.5, "k must be even"},
                        Case{8, 4, 1.5, "p must be a probability"},
                        Case{8, 4, std::numeric_limits<double>::quiet_NaN(), "p must be"}}) {
    try {
      WattsStrogatz(c.n, c.k, c.p, 1);
      ADD_FAILURE() << "accepted n=" << c.n << " k=" << c.k << " p=" << c.p;
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), HasSubstr("WattsStrogatz(n="));
      EXPECT_THAT(e.what(), HasSubstr(c.says));
    }
  }
}

TEST(GeneratorTest, OrientingLowToHighGivesForwardEdgesAndTheSinksAsOutputs) {
  const WsGraph g = WattsStrogatz(32, 4, 0.75, 3);
  const zoo::OwnedStageWiring w = zoo::OrientLowToHigh(g);
  ASSERT_EQ(w.edges.size(), g.edges.size());
  std::set<int> has_successor;
  for (size_t i = 0; i < w.edges.size(); ++i) {
    EXPECT_LT(w.edges[i].from, w.edges[i].to);
    if (i > 0) {
      const auto& a = w.edges[i - 1];
      const auto& b = w.edges[i];
      EXPECT_TRUE(a.to < b.to || (a.to == b.to && a.from < b.from)) << "grouped by target";
    }
    has_successor.insert(w.edges[i].from);
  }
  std::vector<int> sinks;
  for (int v = 0; v < 32; ++v) {
    if (!has_successor.count(v)) sinks.push_back(v);
  }
  EXPECT_EQ(w.outputs, sinks);
  EXPECT_THAT(w.outputs, ::testing::Contains(31)) << "the last node has no successor";
}

// ------------------------------------------------------------ RandWire CIFAR

// Producers an operator reads, each once.
std::set<NodeId> Producers(const Node& node) {
  std::set<NodeId> producers;
  for (const Term& term : node.inputs) {
    for (const Slice& s : term) producers.insert(s.producer);
  }
  return producers;
}

TEST(GeneratorTest, RandWireCifarIsADagWithOneEntryAndExitPerStage) {
  for (const auto& [name, seed, c] :
       {std::tuple{"randwire_cifar10", 1, zoo::kRandWireCifar10Channels},
        std::tuple{"randwire_cifar10:s=7", 7, zoo::kRandWireCifar10Channels},
        std::tuple{"randwire_cifar100", 1, zoo::kRandWireCifar100Channels}}) {
    SCOPED_TRACE(name);
    const Graph g = BuildZooModel(name);
    EXPECT_EQ(g.name, name);
    EXPECT_EQ(g.node(0).output, (Shape{3, 32, 32}));
    ASSERT_EQ(g.blocks.size(), 4u) << "stem, two stages, head";
    EXPECT_NO_THROW(CheckSingleSinkBlocks(g));
    for (int stage = 0; stage < 2; ++stage) {
      SCOPED_TRACE("stage " + std::to_string(stage));
      const Block& block = g.blocks[1 + stage];
      ASSERT_EQ(block.inner.size(), 32u) << "one operator per graph node";
      const std::set<NodeId> inside(block.inner.begin(), block.inner.end());
      int edges = 0, sources = 0;
      for (NodeId id : block.inner) {
        const Node& node = g.node(id);
        const std::set<NodeId> producers = Producers(node);
        for (NodeId p : producers) {
          EXPECT_LT(p, id) << "acyclic: every edge goes forward";
          EXPECT_TRUE(p == block.enter || inside.count(p)) << node.name << " reads outside";
        }
        if (producers.count(block.enter)) {
          // A source: it reads the stage input only, with stride 2.
          EXPECT_EQ(producers.size(), 1u) << node.name;
          EXPECT_EQ(node.op.chain.at(1).conv.stride, (Window{2, 2})) << node.name;
          ++sources;
        } else {
          edges += static_cast<int>(producers.size());
        }
        EXPECT_EQ(node.output, (Shape{2 * c << stage, 16 >> stage, 16 >> stage})) << node.name;
      }
      // The wiring is the generator's graph for this stage's seed.
      const zoo::OwnedStageWiring wiring =
          zoo::OrientLowToHigh(WattsStrogatz(32, 4, 0.75, 2 * seed + stage));
      EXPECT_EQ(edges, 64) << "n*k/2 edges of WS(32,4,0.75)";
      EXPECT_EQ(static_cast<int>(wiring.edges.size()), edges);
      EXPECT_GE(sources, 1);
      const Node& exit = g.node(block.exit);
      EXPECT_EQ(exit.op.kind, OpKind::kIdentity);
      EXPECT_EQ(Producers(exit).size(), wiring.outputs.size()) << "the exit sums the sinks";
    }
    EXPECT_EQ(g.nodes.back().output, (Shape{1280, 1, 1}));
  }
}

TEST(GeneratorTest, RandWireCifarSeedsDrawDifferentStagesAndSeedOneIsThePlainName) {
  const Graph plain = BuildZooModel("randwire_cifar10");
  std::string difference;
  EXPECT_TRUE(StructurallyEqual(plain, BuildZooModel("randwire_cifar10:s=1"), &difference))
      << difference;
  EXPECT_FALSE(StructurallyEqual(plain, BuildZooModel("randwire_cifar10:s=7")));
  EXPECT_FALSE(StructurallyEqual(plain, BuildZooModel("randwire_cifar10:s=2")));
}

// Table 1 of the Serenity paper: RandWire CIFAR10 111.0M multiply-adds,
// CIFAR100 160.0M. C was calibrated on these (docs/models.md); the weights
// (1.2M, 4.7M there) are not reachable with one C (see docs/models.md).
TEST(GeneratorTest, RandWireCifarMultiplyAddsAreWithinFivePercentOfSerenitysTableOne) {
  EXPECT_NEAR(CountModelSize(BuildZooModel("randwire_cifar10")).macs, 111.0e6, 0.05 * 111.0e6);
  EXPECT_NEAR(CountModelSize(BuildZooModel("randwire_cifar100")).macs, 160.0e6, 0.05 * 160.0e6);
}

// ---------------------------------------------------------------------- DARTS

// Operators whose names start with `prefix`, counted by kind (hint if any).
std::map<std::string, int> KindsUnder(const Graph& g, const std::string& prefix) {
  std::map<std::string, int> kinds;
  for (const Node& node : g.nodes) {
    if (!node.name.starts_with(prefix)) continue;
    ++kinds[node.hint.empty() ? ToString(node.op.kind) : node.hint];
  }
  return kinds;
}

TEST(GeneratorTest, DartsCellMatchesTheGenotype) {
  const Graph g = BuildZooModel("darts_cell");
  // Normal cell of DARTS_V2: 5 sep_conv_3x3 (two relu-sepconv operators
  // each) and 1 dil_conv_3x3 = 11 convolution operators, 4 states, and the
  // output concat "cell_0" (checked below). Cell 0 follows the stems'
  // reduction, so its input 0 is a FactorizedReduce (two relu-1x1/2
  // convolutions and their concat: the fifth identity), its input 1 a
  // relu-1x1 convolution.
  const std::map<std::string, int> cell0 = KindsUnder(g, "cell_0.");
  EXPECT_EQ(cell0, (std::map<std::string, int>{
                       {"ReluSepConv", 10}, {"ReluDilConv", 1}, {"ReluConv", 3}, {"identity", 5}}));
  const NodeId out = *g.Find("cell_0");
  EXPECT_EQ(g.node(out).inputs.size(), 4u) << "concat of states 2..5";
  EXPECT_EQ(g.node(out).output, (Shape{4 * 48, 28, 28}));

  // The genotype's wiring: state 4 = sep(s1) + skip(s0), state 5 = skip(s0) + dil(state 2).
  auto producer_names = [&](const std::string& name) {
    std::set<std::string> names;
    for (NodeId p : Producers(g.node(*g.Find(name)))) names.insert(g.node(p).name);
    return names;
  };
  EXPECT_EQ(producer_names("cell_0.state4"),
            (std::set<std::string>{"cell_0.state4.left.sep2", "cell_0.preprocess0"}));
  EXPECT_EQ(producer_names("cell_0.state5"),
            (std::set<std::string>{"cell_0.preprocess0", "cell_0.state5.right.dil"}));
  EXPECT_EQ(producer_names("cell_0.state5.right.dil"), (std::set<std::string>{"cell_0.state2"}));
  const Node& dil = g.node(*g.Find("cell_0.state5.right.dil"));
  EXPECT_EQ(dil.op.chain.at(1).conv.dilation, (Window{2, 2}));
  EXPECT_EQ(dil.op.chain.at(1).conv.padding, (Window{2, 2}));

  // Cell 0's output is read by convolutions (cell 1's preprocess1), which
  // one identity exit closes.
  EXPECT_EQ(producer_names("cell_1.preprocess1"), (std::set<std::string>{"cell_0"}));
  EXPECT_EQ(g.nodes.back().name, "cell_1.states");
  EXPECT_NO_THROW(CheckSingleSinkBlocks(g));
}

TEST(GeneratorTest, DartsImageNetReducesTwiceWithTheReductionGenotype) {
  const Graph g = BuildZooModel("darts_imagenet");
  ASSERT_EQ(g.blocks.size(), 3u);
  EXPECT_EQ(g.blocks[1].parts.size(), 15u) << "stem1 and one part per cell";
  // Reduction cells (4 and 9): 5 max pools, 4 states, no convolution but
  // the two preprocessing ones (the skips read state 2 itself); the cells
  // after them start with a FactorizedReduce.
  for (const char* cell : {"cell_4.", "cell_9."}) {
    EXPECT_EQ(KindsUnder(g, cell),
              (std::map<std::string, int>{{"pool", 5}, {"ReluConv", 2}, {"identity", 4}}))
        << cell;
  }
  EXPECT_EQ(KindsUnder(g, "cell_5.preprocess0"),
            (std::map<std::string, int>{{"ReluConv", 2}, {"identity", 1}}));
  EXPECT_EQ(g.node(*g.Find("cell_3")).output, (Shape{192, 28, 28}));
  EXPECT_EQ(g.node(*g.Find("cell_8")).output, (Shape{384, 14, 14}));
  EXPECT_EQ(g.node(*g.Find("cell_13")).output, (Shape{768, 7, 7}));
  EXPECT_EQ(g.nodes.back().output, (Shape{768, 1, 1}));
  // Nodes in the order PyTorch's forward runs them: stems, then cells.
  EXPECT_LT(*g.Find("stem1"), *g.Find("cell_0.preprocess0.conv_1"));
  EXPECT_LT(*g.Find("cell_0.state2.left.sep2"), *g.Find("cell_0.state2.right.sep1"));
  EXPECT_LT(*g.Find("cell_0"), *g.Find("cell_1.preprocess0"));
}

TEST(GeneratorTest, DartsRefusesOptionsWithoutANetworkNamingThem) {
  EXPECT_THROW(zoo::BuildDartsImageNet({.channels = 47}), Error);
  EXPECT_THROW(zoo::BuildDartsImageNet({.layers = 2}), Error);
  zoo::DartsGenotype bad = zoo::DartsV2();
  bad.normal[2].input = 3;  // step 1 cannot read state 3
  try {
    zoo::BuildDartsImageNet({}, bad);
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("normal cell: edge 2 reads state 3"));
  }
}

// ------------------------------------------------------------ the zoo names

struct GeneratedCase {
  const char* name;
  int blocks, operators;
};

TEST(GeneratorTest, EveryGeneratedZooModelBuildsWithCheckedBlocks) {
  for (const GeneratedCase& c :
       {GeneratedCase{"randwire_cifar10", 4, 70}, GeneratedCase{"randwire_cifar100", 4, 70},
        GeneratedCase{"randwire_cifar10:s=7", 4, 70}, GeneratedCase{"darts_cell", 2, 26},
        GeneratedCase{"darts_imagenet", 3, 250}}) {
    SCOPED_TRACE(c.name);
    Graph g = BuildZooModel(c.name);  // InferShapes ran in Finish
    EXPECT_EQ(static_cast<int>(g.blocks.size()), c.blocks);
    EXPECT_EQ(g.OperatorCount(), c.operators);
    int in_blocks = 0;
    for (const Block& block : g.blocks) in_blocks += static_cast<int>(block.Operators().size());
    EXPECT_EQ(in_blocks, c.operators) << "every operator in exactly one block";
    EXPECT_NO_THROW(CheckSingleSinkBlocks(g));
    EXPECT_NO_THROW(InferShapes(g));
    // Written and read back through the IOS JSON format unchanged.
    std::string difference;
    EXPECT_TRUE(StructurallyEqual(g, ParseIosJson(ToIosJson(g), c.name).graph, &difference))
        << difference;
  }
}

TEST(GeneratorTest, ZooListsTheGeneratedModelsAfterThePapersFour) {
  std::vector<std::string> names;
  for (const ZooEntry& entry : ZooModels()) {
    names.push_back(entry.name);
    EXPECT_EQ(entry.generated, names.size() > 4) << entry.name;
  }
  EXPECT_EQ(names, (std::vector<std::string>{"inception_v3", "squeezenet", "nasnet", "randwire",
                                             "randwire_cifar10", "randwire_cifar100", "darts_cell",
                                             "darts_imagenet"}));
}

TEST(GeneratorTest, BadZooParametersAreRefusedNamingTheParameterAndWhatWasExpected) {
  struct Case {
    const char* name;
    std::vector<const char*> says;
  };
  for (const Case& c : {
           Case{"randwire_cifar10:x=7",
                {"'randwire_cifar10:x=7'", "unknown parameter 'x=7'", "expected s=SEED"}},
           Case{"randwire_cifar10:", {"unknown parameter ''", "expected s=SEED"}},
           Case{"randwire_cifar10:s", {"unknown parameter 's'"}},
           Case{"randwire_cifar10:s=abc", {"s: expected a seed from 0 to 4294967295, got 'abc'"}},
           Case{"randwire_cifar10:s=-1", {"s: expected a seed", "got '-1'"}},
           Case{"randwire_cifar10:s=7x", {"s: expected a seed", "got '7x'"}},
           Case{"randwire_cifar100:s=4294967296", {"s: expected a seed", "got '4294967296'"}},
           Case{"randwire_cifar10:s=", {"s: expected a seed", "got ''"}},
           Case{"randwire_cifar10:s=1,s=2", {"s given twice"}},
           Case{"inception_v3:s=7",
                {"'inception_v3:s=7'", "inception_v3 takes no parameters",
                 "randwire_cifar10, randwire_cifar100"}},
           Case{"darts_cell:s=7", {"darts_cell takes no parameters"}},
           Case{"resnet50:s=7", {"unknown zoo model 'resnet50:s=7'", "known: inception_v3"}},
       }) {
    SCOPED_TRACE(c.name);
    try {
      BuildZooModel(c.name);
      ADD_FAILURE() << "accepted";
    } catch (const Error& e) {
      for (const char* text : c.says) EXPECT_THAT(e.what(), HasSubstr(text));
    }
  }
  EXPECT_EQ(BuildZooModel("randwire_cifar10:s=4294967295").OperatorCount(), 70);
}

TEST(GeneratorTest, ModelLoaderTakesParameterisedZooNamesAndPassesTheirErrorsOn) {
  EXPECT_EQ(LoadModel("zoo:randwire_cifar10:s=7").name, "randwire_cifar10:s=7");
  EXPECT_EQ(LoadModel("randwire_cifar100:s=3").graph.name, "randwire_cifar100:s=3");
  try {
    LoadModel("zoo:randwire_cifar10:s=x");
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("s: expected a seed"));
  }
}

// ----------------------------------------------------------------- model size

TEST(ModelSizeTest, CountsConvolutionMultiplyAddsAndWeightsThroughSequentialSteps) {
  zoo::GraphBuilder b("sizes", Shape{2, 4, 4});
  b.BeginBlock();
  // 3x3 conv 2 -> 3, pad 1: 3*4*4 outputs x 2*9 taps; 3*2*9 + 3 weights.
  const NodeId c = b.AddConv("c", b.Of(zoo::GraphBuilder::kInput), 3, zoo::Square(3),
                             zoo::Square(1), zoo::Square(1), Activation::kRelu);
  // relu -> depthwise 3x3/2 (3 -> 3, 2x2 out: 3*4*9 MACs, 3*9+3 weights)
  // -> pointwise 3 -> 5 (5*4*3 MACs, 5*3+5 weights).
  const NodeId s =
      b.AddReluSepConv("s", b.Of(c), 5, zoo::Square(3), zoo::Square(2), zoo::Square(1));
  b.AddPool("p", b.Of(s), PoolType::kMax, zoo::Square(2), zoo::Square(2), zoo::Square(0));
  b.EndBlock();
  const ModelSize size = CountModelSize(b.Finish());
  EXPECT_EQ(size.macs, 3 * 16 * 18 + 3 * 4 * 9 + 5 * 4 * 3);
  EXPECT_EQ(size.weights, (3 * 18 + 3) + (3 * 9 + 3) + (5 * 3 + 5));
}

}  // namespace
}  // namespace ios
