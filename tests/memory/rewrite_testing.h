// Helpers for the rewriting tests (rewrite_test.cc, rewrite_cpu_test.cc):
// random rewriting sites, whole-network runs of an original and a rewritten
// graph, and a Kahn-order peak to judge rewrites by.
#pragma once

#include <gtest/gtest.h>

#include <deque>
#include <random>
#include <string>
#include <vector>

#include "common/graph.h"
#include "common/part_dag.h"
#include "exec/device.h"
#include "exec/weights.h"
#include "memory/memory_model.h"
#include "memory/memory_order.h"
#include "memory/rewrite.h"
#include "run/network_run.h"
#include "tests/exec/exec_testing.h"

namespace ios::memory::testing {

//! Kahn's algorithm over the whole graph with a FIFO queue (sources, then
//! each operator's newly ready readers in node order): a TensorFlow
//! Lite-style order, the baseline rewrites are judged by in tests.
inline std::vector<NodeId> KahnOrderOf(const Graph& graph) {
  const size_t n = graph.nodes.size();
  std::vector<std::vector<NodeId>> readers(n);
  std::vector<int> waiting(n, 0);
  for (NodeId id = 1; id < static_cast<NodeId>(n); ++id) {
    std::vector<NodeId> producers;
    for (const Term& t : graph.node(id).inputs) {
      for (const Slice& s : t) producers.push_back(s.producer);
    }
    std::sort(producers.begin(), producers.end());
    producers.erase(std::unique(producers.begin(), producers.end()), producers.end());
    for (NodeId p : producers) {
      readers[p].push_back(id);
      if (p != 0) ++waiting[id];
    }
  }
  std::deque<NodeId> ready;
  for (NodeId id = 1; id < static_cast<NodeId>(n); ++id) {
    if (waiting[id] == 0) ready.push_back(id);
  }
  std::vector<NodeId> order;
  while (!ready.empty()) {
    const NodeId u = ready.front();
    ready.pop_front();
    order.push_back(u);
    for (NodeId r : readers[u]) {
      if (--waiting[r] == 0) ready.push_back(r);
    }
  }
  return order;
}

//! The plan's peak bytes at batch 1 under KahnOrderOf.
inline int64_t KahnPeak(const Graph& graph) {
  std::vector<std::vector<NodeId>> stages;
  for (NodeId id : KahnOrderOf(graph)) stages.push_back({id});
  return PeakOf(graph, stages, 1);
}

//! The plan's peak bytes at batch 1 running the nodes in their order.
inline int64_t NodeOrderPeak(const Graph& graph) {
  std::vector<std::vector<NodeId>> stages;
  for (NodeId id = 1; id < static_cast<NodeId>(graph.nodes.size()); ++id) stages.push_back({id});
  return PeakOf(graph, stages, 1);
}

//! Each block's parts (the block whole when it has none), in order: the
//! regions an order runs one after another.
inline std::vector<std::vector<NodeId>> RegionsOf(const Graph& graph) {
  std::vector<std::vector<NodeId>> parts;
  for (const Block& b : graph.blocks) {
    if (b.parts.empty()) parts.push_back(b.Operators());
    for (const auto& p : b.parts) parts.push_back(p);
  }
  return parts;
}

//! The plan's peak bytes at batch 1 of each region of RegionsOf, its
//! operators run in Kahn order (memory::KahnOrder over the part).
inline std::vector<int64_t> KahnRegionPeaks(const Graph& graph) {
  const exec::TensorLayout layout = ModelLayout(graph, MemoryModel::kPlan);
  const auto parts = RegionsOf(graph);
  std::vector<int64_t> peaks;
  for (size_t i = 0; i < parts.size(); ++i) {
    const PartMemory costs(layout, parts, i);
    const PartDag dag = PartDag::Make(graph, parts[i]);
    peaks.push_back(costs.Background() + PeakOfOrder(costs, KahnOrder(dag)));
  }
  return peaks;
}

inline OpParams ConvOp(int out, int kernel, int stride, int pad, int dilation, int groups,
                       Activation act, bool bias) {
  OpParams op;
  op.kind = OpKind::kConv;
  op.conv.out_channels = out;
  op.conv.kernel = {kernel, kernel};
  op.conv.stride = {stride, stride};
  op.conv.padding = {pad, pad};
  op.conv.dilation = {dilation, dilation};
  op.conv.groups = groups;
  op.conv.act = act;
  op.conv.bias = bias;
  return op;
}

inline OpParams ActOp(Activation act) {
  OpParams op;
  op.kind = OpKind::kActivation;
  op.act = act;
  return op;
}

inline OpParams SeqOp(std::vector<OpParams> chain) {
  OpParams op;
  op.kind = OpKind::kSequential;
  op.chain = std::move(chain);
  return op;
}

//! A random small network around one site of `rule`: k terms computed from
//! the input (some summing two convolutions), concatenated by an identity
//! read by one or two readers of that rule, or read directly by one reader.
//! Two readers are joined by an identity concatenation as the exit.
inline Graph RandomSiteGraph(uint64_t seed, RewriteRule rule, bool through_concat) {
  std::mt19937_64 rng(seed);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  const Activation acts[] = {Activation::kNone, Activation::kRelu, Activation::kSigmoid};
  exec::testing::GraphBuilder b({pick(1, 3), pick(5, 8), pick(5, 8)},
                                "site" + std::to_string(seed));
  const int k = pick(2, 4);
  Inputs terms;
  int channels = 0;
  for (int i = 0; i < k; ++i) {
    const int c = pick(1, 4);
    const int kernel = pick(0, 1) * 2 + 1;
    const std::string name = "t" + std::to_string(i);
    const NodeId a =
        b.Add(name, ConvOp(c, kernel, 1, kernel / 2, 1, 1, acts[pick(0, 2)], true), {{b.S(0)}});
    Term term = {b.S(a)};
    if (pick(0, 2) == 0) {
      term.push_back(
          b.S(b.Add(name + "b", ConvOp(c, 1, 1, 0, 1, 1, Activation::kRelu, true), {{b.S(0)}})));
    }
    terms.push_back(term);
    channels += c;
  }
  // The reader's op: activations, then the partitioned convolution(s), then
  // sometimes a tail the partials leave whole.
  std::vector<OpParams> chain;
  if (pick(0, 1)) chain.push_back(ActOp(Activation::kRelu));
  const int kernel = pick(1, 3), stride = pick(1, 2), dilation = pick(1, 2);
  const int pad = pick(0, 1);
  if (rule == RewriteRule::kChannelWise) {
    chain.push_back(
        ConvOp(pick(1, 6), kernel, stride, pad, dilation, 1, acts[pick(0, 2)], pick(0, 1) == 1));
  } else {
    const int mult = pick(1, 2);
    chain.push_back(ConvOp(mult * channels, kernel, stride, pad, dilation, channels,
                           acts[pick(0, 2)], pick(0, 1) == 1));
    if (pick(0, 1)) chain.push_back(ActOp(Activation::kTanh));
    if (rule == RewriteRule::kSeparable) {
      chain.push_back(ConvOp(pick(1, 6), 1, 1, 0, 1, 1, acts[pick(0, 2)], pick(0, 1) == 1));
    }
  }
  if (pick(0, 2) == 0) {
    // After a lone depthwise a groups-1 convolution would make the rule
    // kSeparable: a pool there.
    OpParams pool;
    pool.kind = OpKind::kPool;
    pool.pool.type = PoolType::kAvg;
    pool.pool.kernel = {3, 3};
    pool.pool.padding = {1, 1};
    chain.push_back(rule == RewriteRule::kKernelWise
                        ? pool
                        : ConvOp(pick(1, 3), 1, 1, 0, 1, 1, Activation::kNone, true));
  }
  const OpParams op = chain.size() == 1 ? chain[0] : SeqOp(chain);
  if (!through_concat) {
    b.Add("reader", op, terms);
    return b.Done();
  }
  OpParams identity;
  const NodeId m = b.Add("concat", identity, terms);
  const NodeId r1 = b.Add("reader", op, {{b.S(m)}});
  if (pick(0, 1)) return b.Done();
  const NodeId r2 = b.Add("reader2", op, {{b.S(m)}});
  b.Add("out", identity, {{b.S(r1)}, {b.S(r2)}});
  return b.Done();
}

//! The output of `graph` run whole, one operator a stage, on `device`.
inline std::vector<float> RunWhole(exec::Device& device, const Graph& graph,
                                   const exec::WeightStore& weights,
                                   const std::vector<float>& input, int batch) {
  return run::Execute(device, graph, run::SequentialNetworkSchedule(graph), weights, batch, input,
                      nullptr)
      .output;
}

//! Runs `original` (random weights) and `rewritten` (weights derived from
//! them) on `device` and expects the outputs within `relative` of each
//! other, relative to the largest output value.
inline void ExpectSameFunction(exec::Device& device, const Graph& original,
                               const Rewritten& rewritten, double relative, int batch,
                               const std::string& what) {
  const exec::WeightStore weights = exec::WeightStore::Random(original, 7);
  const exec::WeightStore derived = DeriveWeights(original, weights, rewritten);
  const Shape& in = original.node(0).output;
  const std::vector<float> input =
      exec::SeededValues(static_cast<size_t>(batch) * in.c * in.h * in.w, 11);
  const std::vector<float> want = RunWhole(device, original, weights, input, batch);
  const std::vector<float> got = RunWhole(device, rewritten.graph, derived, input, batch);
  const run::Comparison c = run::Compare(got, want);
  EXPECT_GT(c.max_abs_reference, 0) << what << ": the output is all zeros";
  EXPECT_TRUE(c.Within(relative)) << what << ": largest difference " << c.max_abs_diff
                                  << " against largest value " << c.max_abs_reference;
}

}  // namespace ios::memory::testing
