#include "memory/rewrite.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "common/blocks.h"
#include "common/error.h"
#include "common/part_dag.h"
#include "common/zoo.h"
#include "exec/device.h"
#include "tests/memory/rewrite_testing.h"

namespace ios::memory {
namespace {

using exec::testing::GraphBuilder;
using testing::ActOp;
using testing::ConvOp;
using ::testing::HasSubstr;
using testing::SeqOp;

constexpr int kRandomSites = 25;

OpParams Identity() { return OpParams{}; }

OpParams ReluConv(int out) {
  return SeqOp({ActOp(Activation::kRelu), ConvOp(out, 1, 1, 0, 1, 1, Activation::kNone, true)});
}

// in -> a (2 ch), b (3 ch) -> concat -> readers; the readers' outputs
// concatenated as the exit.
struct TwoTerms {
  GraphBuilder b{Shape{2, 6, 6}};
  NodeId a = b.Add("a", ConvOp(2, 3, 1, 1, 1, 1, Activation::kRelu, true), {{b.S(0)}});
  NodeId c = b.Add("b", ConvOp(3, 1, 1, 0, 1, 1, Activation::kNone, true), {{b.S(0)}});
  NodeId m = b.Add("concat", Identity(), {{b.S(a)}, {b.S(c)}});
};

const SkippedSite* SkippedNamed(const SiteSearch& s, const std::string& name) {
  for (const SkippedSite& k : s.skipped) {
    if (k.name == name) return &k;
  }
  return nullptr;
}

TEST(RewriteTest, FindsChannelWiseSitesBehindAnIdentityConcatOnlyWhenAllReadersQualify) {
  {
    TwoTerms t;
    const NodeId r1 = t.b.Add("r1", ReluConv(4), {{t.b.S(t.m)}});
    const NodeId r2 =
        t.b.Add("r2", ConvOp(4, 3, 1, 1, 1, 1, Activation::kRelu, false), {{t.b.S(t.m)}});
    t.b.Add("out", Identity(), {{t.b.S(r1)}, {t.b.S(r2)}});
    const Graph g = t.b.Done();
    const SiteSearch s = FindSites(g);
    ASSERT_EQ(s.sites.size(), 1u);
    EXPECT_EQ(s.sites[0].concat, t.m);
    EXPECT_EQ(s.sites[0].readers, (std::vector<NodeId>{r1, r2}));
    EXPECT_EQ(s.sites[0].rules,
              (std::vector<RewriteRule>{RewriteRule::kChannelWise, RewriteRule::kChannelWise}));
    EXPECT_EQ(s.sites[0].terms.size(), 2u);
    ASSERT_NE(SkippedNamed(s, "out"), nullptr);  // the exit concatenation
    EXPECT_THAT(SkippedNamed(s, "out")->reason, HasSubstr("block's exit"));
  }
  // One reader is a pool: rewriting only the other would free nothing.
  {
    TwoTerms t;
    const NodeId r1 = t.b.Add("r1", ReluConv(5), {{t.b.S(t.m)}});
    OpParams pool;
    pool.kind = OpKind::kPool;
    const NodeId r2 = t.b.Add("pool", pool, {{t.b.S(t.m)}});
    t.b.Add("out", Identity(), {{t.b.S(r1)}, {t.b.S(r2)}});
    const SiteSearch s = FindSites(t.b.Done());
    EXPECT_TRUE(s.sites.empty());
    ASSERT_NE(SkippedNamed(s, "concat"), nullptr);
    EXPECT_THAT(SkippedNamed(s, "concat")->reason, HasSubstr("'pool'"));
  }
  // A reader that reads part of the concatenation, or sums it with another
  // tensor, does not read it whole.
  for (bool sum : {false, true}) {
    TwoTerms t;
    const NodeId r1 = t.b.Add("r1", ReluConv(5), {{t.b.S(t.m)}});
    const Inputs partly = sum ? Inputs{{t.b.S(t.m), t.b.S(t.m)}} : Inputs{{t.b.S(t.m, 0, 3)}};
    const NodeId r2 = t.b.Add("r2", ReluConv(5), partly);
    t.b.Add("out", Identity(), {{t.b.S(r1)}, {t.b.S(r2)}});
    const SiteSearch s = FindSites(t.b.Done());
    EXPECT_TRUE(s.sites.empty()) << sum;
    ASSERT_NE(SkippedNamed(s, "concat"), nullptr);
    EXPECT_THAT(SkippedNamed(s, "concat")->reason, HasSubstr("does not read it whole"));
  }
}

TEST(RewriteTest, SkipsASiteWhoseConcatIsABlockExit) {
  TwoTerms t;
  const NodeId r = t.b.Add("r", ReluConv(4), {{t.b.S(t.m)}});
  Graph g = t.b.Done();
  // Two blocks: the concatenation ends the first.
  g.blocks = {Block{0, {t.a, t.c}, t.m, {}}, Block{t.m, {}, r, {}}};
  InferShapes(g);
  const SiteSearch s = FindSites(g);
  EXPECT_TRUE(s.sites.empty());
  ASSERT_NE(SkippedNamed(s, "concat"), nullptr);
  EXPECT_THAT(SkippedNamed(s, "concat")->reason, HasSubstr("block's exit"));
}

TEST(RewriteTest, KernelWiseNeedsADepthwiseConv) {
  const struct {
    OpParams op;
    std::optional<RewriteRule> rule;
  } cases[] = {
      {ConvOp(5, 3, 1, 1, 1, 5, Activation::kNone, true), RewriteRule::kKernelWise},
      {ConvOp(10, 3, 1, 1, 1, 5, Activation::kRelu, true), RewriteRule::kKernelWise},
      {SeqOp({ActOp(Activation::kRelu), ConvOp(5, 3, 1, 1, 1, 5, Activation::kNone, true),
              ConvOp(4, 1, 1, 0, 1, 1, Activation::kNone, true)}),
       RewriteRule::kSeparable},
      {ConvOp(4, 3, 1, 1, 1, 1, Activation::kNone, true), RewriteRule::kChannelWise},
  };
  for (const auto& c : cases) {
    TwoTerms t;
    t.b.Add("r", c.op, {{t.b.S(t.m)}});
    const SiteSearch s = FindSites(t.b.Done());
    ASSERT_EQ(s.sites.size(), 1u) << Describe(c.op);
    EXPECT_EQ(s.sites[0].rules.at(0), *c.rule) << Describe(c.op);
  }
  // The same over a concatenation read directly; a grouped convolution
  // that is not depthwise is skipped with its groups named.
  GraphBuilder b{Shape{2, 6, 6}};
  const NodeId a = b.Add("a", ConvOp(2, 1, 1, 0, 1, 1, Activation::kNone, true), {{b.S(0)}});
  const NodeId c = b.Add("c", ConvOp(2, 1, 1, 0, 1, 1, Activation::kNone, true), {{b.S(0)}});
  const NodeId g2 =
      b.Add("grouped", ConvOp(4, 3, 1, 1, 1, 2, Activation::kNone, true), {{b.S(a)}, {b.S(c)}});
  const NodeId dw =
      b.Add("dw", ConvOp(4, 3, 1, 1, 1, 4, Activation::kNone, true), {{b.S(a)}, {b.S(c)}});
  b.Add("out", Identity(), {{b.S(g2)}, {b.S(dw)}});
  const SiteSearch s = FindSites(b.Done());
  ASSERT_EQ(s.sites.size(), 1u);
  EXPECT_EQ(s.sites[0].concat, -1);
  EXPECT_EQ(s.sites[0].readers, std::vector<NodeId>{dw});
  EXPECT_EQ(s.sites[0].rules.at(0), RewriteRule::kKernelWise);
  EXPECT_EQ(FormsOf(s.sites[0]), std::vector<RewriteForm>{RewriteForm::kConcat});
  ASSERT_NE(SkippedNamed(s, "grouped"), nullptr);
  EXPECT_THAT(SkippedNamed(s, "grouped")->reason, HasSubstr("2 groups over 4 channels"));
}

TEST(RewriteTest, PartialsAreNamedAfterTheReaderWhoseReplacementKeepsItsName) {
  TwoTerms t;
  const NodeId third =
      t.b.Add("third", ConvOp(1, 1, 1, 0, 1, 1, Activation::kNone, true), {{t.b.S(0)}});
  t.b.Add("r",
          SeqOp({ConvOp(4, 1, 1, 0, 1, 1, Activation::kSigmoid, true),
                 ConvOp(2, 1, 1, 0, 1, 1, Activation::kNone, true)}),
          {{t.b.S(t.a)}, {t.b.S(t.c)}, {t.b.S(third)}});
  const Graph g = t.b.Done();
  const SiteSearch s = FindSites(g);
  ASSERT_EQ(s.sites.size(), 1u);  // "r" alone: nothing reads "concat"
  const Rewritten chain = Apply(g, s.sites[0], RewriteForm::kChain);
  std::set<std::string> names;
  for (const Node& n : chain.graph.nodes) names.insert(n.name);
  for (const char* name : {"r", "r.part0", "r.part1", "r.part2", "r.sum1"}) {
    EXPECT_TRUE(names.count(name)) << name;
  }
  const Node& r = chain.graph.node(*chain.graph.Find("r"));
  EXPECT_EQ(r.output, g.node(*g.Find("r")).output);
  // The sigmoid after the sum, then the tail convolution.
  ASSERT_EQ(r.op.kind, OpKind::kSequential);
  EXPECT_EQ(r.op.chain.at(0).kind, OpKind::kActivation);
  EXPECT_EQ(r.op.chain.at(1).kind, OpKind::kConv);
  EXPECT_EQ(r.inputs.size(), 1u);
  EXPECT_EQ(r.inputs[0].size(), 2u);  // the running sum and the last partial
  // Only the first partial has a bias.
  EXPECT_TRUE(chain.graph.node(*chain.graph.Find("r.part0")).op.conv.bias);
  EXPECT_FALSE(chain.graph.node(*chain.graph.Find("r.part1")).op.conv.bias);
  const Rewritten all = Apply(g, s.sites[0], RewriteForm::kSumAll);
  EXPECT_FALSE(all.graph.Find("r.sum1").has_value());
  EXPECT_EQ(all.graph.node(*all.graph.Find("r")).inputs.at(0).size(), 3u);
}

TEST(RewriteTest, DerivedWeightsSliceTheKernelByInputChannelsForChannelWise) {
  TwoTerms t;
  t.b.Add("r", ConvOp(4, 3, 1, 1, 1, 1, Activation::kNone, true), {{t.b.S(t.m)}});
  const Graph g = t.b.Done();
  const Rewritten rw = Apply(g, FindSites(g).sites.at(0), RewriteForm::kSumAll);
  const exec::WeightStore w = exec::WeightStore::Random(g, 3);
  const exec::WeightStore d = DeriveWeights(g, w, rw);
  const exec::ConvWeights& whole = w.At({*g.Find("r"), 0});
  const exec::ConvWeights& p0 = d.At({*rw.graph.Find("r.part0"), 0});
  const exec::ConvWeights& p1 = d.At({*rw.graph.Find("r.part1"), 0});
  ASSERT_EQ(p0.in_per_group, 2);
  ASSERT_EQ(p1.in_per_group, 3);
  EXPECT_EQ(p0.out_channels, 4);
  EXPECT_EQ(p0.bias, whole.bias);
  EXPECT_TRUE(p1.bias.empty());
  // Output channel 3, input channel 4 (the second term's third), tap 5.
  EXPECT_EQ(p1.kernel.at((3 * 3 + 2) * 9 + 5), whole.kernel.at((3 * 5 + 4) * 9 + 5));
  EXPECT_EQ(p0.kernel.at((1 * 2 + 1) * 9 + 0), whole.kernel.at((1 * 5 + 1) * 9 + 0));
}

TEST(RewriteTest, ApplyRefusesAFormTheSiteCannotTakeAndASiteOfAnotherGraph) {
  TwoTerms t;
  t.b.Add("r", ConvOp(4, 3, 1, 1, 1, 1, Activation::kNone, true), {{t.b.S(t.m)}});
  const Graph g = t.b.Done();
  const RewriteSite site = FindSites(g).sites.at(0);
  EXPECT_THAT([&] { Apply(g, site, RewriteForm::kConcat); },
              ::testing::ThrowsMessage<Error>(HasSubstr("cannot take the concat form")));
  RewriteSite stale = site;
  stale.readers = {1};
  EXPECT_THAT([&] { Apply(g, stale, RewriteForm::kSumAll); },
              ::testing::ThrowsMessage<Error>(HasSubstr("not one FindSites gives")));
}

// Every form of random sites of `rule` on the reference device.
void CheckRandomSites(RewriteRule rule, double relative) {
  auto device = exec::MakeReferenceDevice();
  int checked = 0;
  for (int seed = 0; seed < kRandomSites; ++seed) {
    for (bool through : {true, false}) {
      const Graph g = testing::RandomSiteGraph(static_cast<uint64_t>(seed), rule, through);
      const SiteSearch s = FindSites(g);
      ASSERT_EQ(s.sites.size(), 1u) << g.name << " through " << through;
      ASSERT_EQ(s.sites[0].rules.at(0), rule) << g.name;
      for (RewriteForm form : FormsOf(s.sites[0])) {
        const Rewritten rw = Apply(g, s.sites[0], form);
        CheckSingleSinkBlocks(rw.graph);
        testing::ExpectSameFunction(
            *device, g, rw, relative, 2,
            g.name + " " + ToString(form) + " through " + std::to_string(through));
        ++checked;
      }
    }
  }
  EXPECT_GE(checked, 2 * kRandomSites);
}

TEST(RewriteTest, ChannelWisePartitionMatchesTheOriginalOnTheReferenceDevice) {
  CheckRandomSites(RewriteRule::kChannelWise, 1e-5);
}

TEST(RewriteTest, KernelWisePartitionMatchesTheOriginalExactlyOnTheReferenceDevice) {
  // Each output channel is computed by the same arithmetic: bit-identical
  // is expected, 1e-6 asserted.
  CheckRandomSites(RewriteRule::kKernelWise, 1e-6);
}

TEST(RewriteTest, SepConvOnAConcatMatchesTheOriginalOnTheReferenceDevice) {
  CheckRandomSites(RewriteRule::kSeparable, 1e-5);
}

// The zoo models the rewriting is for, small enough to build here.
std::vector<Graph> CellModels() {
  return {BuildZooModel("darts_cell"), BuildZooModel("darts_imagenet"), BuildZooModel("nasnet")};
}

TEST(RewriteTest, RewrittenGraphPassesInferShapesAndSingleSinkBlocks) {
  for (const Graph& g : CellModels()) {
    const SiteSearch s = FindSites(g);
    EXPECT_FALSE(s.sites.empty()) << g.name;
    for (const RewriteSite& site : s.sites) {
      for (RewriteForm form : FormsOf(site)) {
        const std::string what = g.name + ": " + DescribeSite(g, site) + " " + ToString(form);
        const Rewritten rw = Apply(g, site, form);
        Graph copy = rw.graph;
        EXPECT_NO_THROW(InferShapes(copy)) << what;
        EXPECT_NO_THROW(CheckSingleSinkBlocks(rw.graph)) << what;
        EXPECT_NO_THROW(FindBlocks(rw.graph)) << what;
        EXPECT_EQ(rw.graph.nodes.back().name, g.nodes.back().name) << what;
        // Parts still split each block's operators, each in topological order.
        for (const Block& block : rw.graph.blocks) {
          if (block.parts.empty()) continue;
          std::vector<NodeId> all;
          for (const auto& part : block.parts) {
            all.insert(all.end(), part.begin(), part.end());
            EXPECT_NO_THROW(PartDag::Make(rw.graph, part)) << what;
          }
          std::sort(all.begin(), all.end());
          EXPECT_EQ(all, block.Operators()) << what;
        }
      }
    }
  }
}

TEST(RewriteTest, FindsTheCellOutputsOfDartsAndNasnetAsSites) {
  // DARTS: each cell's output is read by the next two cells' 1x1
  // preprocessing (the last by the pool: skipped). NASNet: each cell's
  // output by the next cells' 1x1 projections (the last by the final relu).
  const SiteSearch darts = FindSites(BuildZooModel("darts_imagenet"));
  const SiteSearch nasnet = FindSites(BuildZooModel("nasnet"));
  std::set<std::string> concats;
  for (const auto* s : {&darts, &nasnet}) {
    for (const RewriteSite& site : s->sites) {
      ASSERT_GE(site.concat, 0);
      for (RewriteRule r : site.rules) EXPECT_EQ(r, RewriteRule::kChannelWise);
    }
  }
  const Graph d = BuildZooModel("darts_imagenet");
  for (const RewriteSite& site : darts.sites) concats.insert(d.node(site.concat).name);
  for (int i = 0; i + 1 < 14; ++i) {
    EXPECT_TRUE(concats.count("cell_" + std::to_string(i))) << "cell_" << i;
  }
  EXPECT_FALSE(concats.count("cell_13"));
  const Graph n = BuildZooModel("nasnet");
  concats.clear();
  for (const RewriteSite& site : nasnet.sites) concats.insert(n.node(site.concat).name);
  EXPECT_TRUE(concats.count("cell_stem_0"));
  EXPECT_TRUE(concats.count("reduction_cell_0"));
  EXPECT_TRUE(concats.count("cell_16"));
  EXPECT_FALSE(concats.count("cell_17"));  // read by the final relu
}

TEST(RewriteTest, DartsCellRewrittenEverywhereMatchesTheOriginalOnTheReferenceDevice) {
  const Graph g = BuildZooModel("darts_cell");
  ASSERT_TRUE(run::SmallEnoughForReference(g, 1));
  // A peak that only falls as nodes are added accepts every site, applied
  // one after another: the weights compose across the steps.
  const MemoryRewrite all = RewriteForMemory(
      g, [](const Graph& graph) { return -static_cast<int64_t>(graph.nodes.size()); });
  ASSERT_FALSE(all.accepted.empty());
  EXPECT_TRUE(all.rejected.empty());
  auto device = exec::MakeReferenceDevice();
  testing::ExpectSameFunction(*device, g, all.rewritten, 1e-5, 1, "darts_cell");
}

TEST(RewriteTest, AKernelWiseRewriteExposesASiteWhoseWeightsComposeAcrossBoth) {
  GraphBuilder b{Shape{2, 7, 7}};
  const NodeId a = b.Add("a", ConvOp(2, 3, 1, 1, 1, 1, Activation::kRelu, true), {{b.S(0)}});
  const NodeId c = b.Add("c", ConvOp(3, 1, 1, 0, 1, 1, Activation::kNone, true), {{b.S(0)}});
  const NodeId dw =
      b.Add("dw", ConvOp(10, 3, 2, 1, 1, 5, Activation::kRelu, true), {{b.S(a)}, {b.S(c)}});
  b.Add("pw", ConvOp(4, 1, 1, 0, 1, 1, Activation::kSigmoid, true), {{b.S(dw)}});
  const Graph g = b.Done();
  // Only the depthwise reads a concatenation until it is rewritten.
  ASSERT_EQ(FindSites(g).sites.size(), 1u);
  const MemoryRewrite all = RewriteForMemory(
      g, [](const Graph& graph) { return -static_cast<int64_t>(graph.nodes.size()); });
  ASSERT_EQ(all.accepted.size(), 2u);
  EXPECT_THAT(all.accepted[0].site, HasSubstr("kernel-wise"));
  EXPECT_THAT(all.accepted[1].site, HasSubstr("dw -> pw (channel-wise)"));
  EXPECT_FALSE(all.rewritten.graph.Find("dw").has_value());  // the concat, rewritten away
  auto device = exec::MakeReferenceDevice();
  testing::ExpectSameFunction(*device, g, all.rewritten, 1e-5, 2, "two rewrites");
}

TEST(RewriteTest, AcceptsOnlyRewritesThatLowerThePeak) {
  const Graph g = BuildZooModel("darts_imagenet");
  // Every rewrite adds nodes: a peak counting nodes rejects them all.
  const MemoryRewrite none = RewriteForMemory(
      g, [](const Graph& graph) { return static_cast<int64_t>(graph.nodes.size()); });
  EXPECT_TRUE(none.accepted.empty());
  EXPECT_EQ(none.rejected.size(), FindSites(g).sites.size());
  EXPECT_EQ(none.rewritten.graph.nodes.size(), g.nodes.size());
  EXPECT_EQ(none.peak_after, none.peak_before);
  for (const SiteOutcome& o : none.rejected) EXPECT_THAT(o.reason, HasSubstr("does not drop"));
  // The Kahn-order peak of the plan: every accepted site lowered it, in
  // sequence, and the result's peak is the last one.
  const MemoryRewrite kahn = RewriteForMemory(g, testing::KahnPeak);
  int64_t peak = kahn.peak_before;
  EXPECT_EQ(peak, testing::KahnPeak(g));
  for (const SiteOutcome& o : kahn.accepted) {
    EXPECT_EQ(o.peak_before, peak) << o.site;
    EXPECT_LT(o.peak_after, o.peak_before) << o.site;
    peak = o.peak_after;
  }
  for (const SiteOutcome& o : kahn.rejected) EXPECT_GE(o.peak_after, o.peak_before) << o.site;
  EXPECT_EQ(kahn.peak_after, peak);
  EXPECT_EQ(testing::KahnPeak(kahn.rewritten.graph), peak);
  // Judged part by part, the cells' rewrites lower their parts' peaks
  // though the stem holds the graph's: accepted, the graph's peak never
  // rising.
  const MemoryRewrite parts = RewriteForMemory(g, testing::KahnRegionPeaks);
  EXPECT_GE(parts.accepted.size(), 5u);
  for (const SiteOutcome& o : parts.accepted) {
    EXPECT_LT(o.local_after, o.local_before) << o.site;
    EXPECT_LE(o.peak_after, o.peak_before) << o.site;
  }
  for (const SiteOutcome& o : parts.rejected) {
    EXPECT_GE(o.local_after, o.local_before) << o.site;
  }
  EXPECT_EQ(parts.peak_before, parts.peak_after);  // the stem's
  EXPECT_EQ(testing::KahnRegionPeaks(parts.rewritten.graph).size(),
            testing::KahnRegionPeaks(g).size());
  // A budget of one site tries one.
  const MemoryRewrite one = RewriteForMemory(g, testing::KahnPeak, {.max_sites = 1});
  EXPECT_LE(one.accepted.size(), 1u);
  int over_budget = 0;
  for (const SiteOutcome& o : one.rejected)
    over_budget += o.reason.find("budget") != std::string::npos;
  EXPECT_EQ(over_budget + 1, static_cast<int>(FindSites(g).sites.size()));
}

}  // namespace
}  // namespace ios::memory
