#pragma once
// Identity graph rewriting (Serenity, "Ordering Chaos", MLSys 2020, §3.3):
// rewrites that keep a network's function but let the order free a
// concatenation's terms earlier. A convolution reading a concatenation of k
// terms becomes k partial convolutions, one per term, summed (channel-wise
// partitioning); a depthwise convolution becomes k partial depthwise
// convolutions, concatenated (kernel-wise). Whether a rewrite lowers the
// peak depends on the memory model (docs/memory.md, "Rewriting"), so
// RewriteForMemory keeps one only where a given peak function says so.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/graph.h"
#include "exec/weights.h"
#include "memory/network_order.h"

namespace ios::memory {

//! How one reader of a concatenation is partitioned. Every rule first
//! applies the reader's leading elementwise activations to each term (they
//! commute with concatenation).
enum class RewriteRule {
  //! A convolution with groups 1: one partial convolution per term over
  //! that term's input channels, the partials summed, then the
  //! convolution's activation and the rest of the reader's chain.
  kChannelWise,
  //! A depthwise convolution (groups == input channels): one partial
  //! depthwise convolution per term over that term's channels (with the
  //! activations after it), the partials concatenated, then the rest.
  kKernelWise,
  //! A depthwise then a groups-1 convolution (ReluSepConv): kernel-wise on
  //! the depthwise, then channel-wise on the pointwise, so each term gets
  //! [activations, depthwise, pointwise] and the partials are summed.
  kSeparable,
};

//! How the partials are combined.
enum class RewriteForm {
  kSumAll,  // one node summing every partial (one term of k slices)
  kChain,   // pairwise sums, each partial added to the running sum
  kConcat,  // kernel-wise only: the partials concatenated (an exec concat view)
};

//! A concatenation of k >= 2 terms and the convolutions that read it.
struct RewriteSite {
  //! The identity node that concatenates the terms (read by the readers
  //! only, each reading it whole); -1 when the one reader reads the terms
  //! itself.
  NodeId concat = -1;
  std::vector<NodeId> readers;     // ascending
  std::vector<RewriteRule> rules;  // per reader
  Inputs terms;                    // the concatenated terms, in channel order
};

//! A concatenation, or a convolution reading one, that is not a site.
struct SkippedSite {
  NodeId node = -1;
  std::string name;
  std::string reason;
};

struct SiteSearch {
  std::vector<RewriteSite> sites;  // in node order of the concat (or reader)
  std::vector<SkippedSite> skipped;
};

//! The rewriting sites of `graph` (shapes inferred, blocks set). Through an
//! identity concatenation, every reader must read it whole as its only
//! input, be in its block and qualify (elementwise activations, then a
//! groups-1 or depthwise convolution); the concatenation must not be a
//! block's exit (v1: rewriting across a block boundary is not done). A
//! reader with k >= 2 terms of its own is a site alone. Everything else
//! that reads or is a concatenation is listed in `skipped` with a reason.
SiteSearch FindSites(const Graph& graph);

//! The forms Apply takes for `site`: kSumAll, and kChain when there are
//! three terms or more, when some reader sums its partials; kConcat when
//! every reader is kernel-wise.
std::vector<RewriteForm> FormsOf(const RewriteSite& site);

//! "cell_3 -> cell_4.conv1x1 (channel-wise), cell_5.conv_prev_1x1
//! (channel-wise), 5 terms": a site for reports.
std::string DescribeSite(const Graph& graph, const RewriteSite& site);
const char* ToString(RewriteRule rule);
const char* ToString(RewriteForm form);

//! Where a convolution of a rewritten graph takes its weights from: output
//! channels [out_begin, out_end) and per-group input channels [in_begin,
//! in_end) of the OIHW kernel of convolution `from` of the original graph;
//! its bias from the same output channels when `bias`, none otherwise.
struct WeightSource {
  exec::ConvSite to, from;
  int out_begin = 0, out_end = 0, in_begin = 0, in_end = 0;
  bool bias = false;
};

//! A rewritten graph and where each of its convolutions' weights come from.
struct Rewritten {
  Graph graph;                        // shapes inferred, blocks and parts updated
  std::vector<WeightSource> weights;  // one per convolution of `graph`, ascending `to`
};

//! `graph` unchanged: every convolution takes its own weights whole.
Rewritten Unchanged(const Graph& graph);

//! `site` (one of FindSites(graph)'s) rewritten in `form`. Each reader is
//! replaced by a node of its name and output (its consumers and reports
//! find it), the concat node removed; new nodes are named
//! "<reader>.part<i>" (partial i, for term i) and "<reader>.sum<i>" (the
//! chain's running sums). Each new node goes right after its last producer
//! in node order, and in the reader's block, in the part of its latest
//! producer, so an order may run a partial as soon as its term is ready.
//! Throws ios::Error naming the site when `form` is not in FormsOf(site) or
//! the site does not match `graph`.
Rewritten Apply(const Graph& graph, const RewriteSite& site, RewriteForm form);
//! The same on an already rewritten graph: `site` is one of
//! FindSites(current.graph)'s, and the weights still come from the graph
//! `current` was derived from.
Rewritten Apply(const Rewritten& current, const RewriteSite& site, RewriteForm form);

//! The weights of `rewritten.graph`, sliced from `original_weights` (those
//! of `original`, the graph `rewritten` was derived from), so the rewritten
//! network computes the same function. Throws ios::Error naming the
//! convolution when a source is missing or its range does not fit.
exec::WeightStore DeriveWeights(const Graph& original, const exec::WeightStore& original_weights,
                                const Rewritten& rewritten);

//! A graph's peak activation bytes under some order (the caller decides
//! which order, batch and memory model).
using PeakFunction = std::function<int64_t(const Graph&)>;
//! The peak bytes of each region of a graph that its order runs one after
//! another (e.g. each part of each block, as the order search cuts them),
//! in a fixed order; a graph's peak is their largest. A rewrite keeps the
//! regions' number (a part it would empty is dropped: then the graphs'
//! largest peaks are compared instead).
using RegionPeaks = std::function<std::vector<int64_t>(const Graph&)>;

//! Rewrites judged by the least-peak order (ios-run --rewrite memory,
//! memory_bench): one peak per region of the graph (each part of each of
//! its blocks, the block whole when it has none, then one for operators in
//! no block), the largest peak of the parts of OptimalNetworkOrder(graph,
//! options) that hold its operators (background included, at
//! options.batch). The regions, not the order's parts, so that they
//! correspond across rewrites: a part a rewrite grows past the order's
//! limit is cut by the order (PartsOf), the region is not. The parts' peaks
//! even where a baseline order beats theirs (its warning says so). Each
//! call searches the whole network again (NASNet: ~1 s or more).
RegionPeaks LeastPeakRegionPeaks(const NetworkOrderOptions& options = {});

struct RewriteOptions {
  bool channel_wise = true;  // sites with a kChannelWise or kSeparable reader
  bool kernel_wise = true;   // sites with a kKernelWise or kSeparable reader
  //! Sites tried (each costs one peak evaluation per form). Sites beyond
  //! it are rejected with a reason saying so.
  int max_sites = 1000;
};

//! One site tried by RewriteForMemory. Names, not ids: ids change as
//! sites are applied.
struct SiteOutcome {
  std::string site;                         // DescribeSite at the time it was tried
  RewriteForm form = RewriteForm::kSumAll;  // accepted (or best tried) form
  int64_t peak_before = 0, peak_after = 0;  // the graph's peak before and with it
  //! The largest peak of the regions the rewrite changes, before and with
  //! it (the graph's peak with a PeakFunction).
  int64_t local_before = 0, local_after = 0;
  std::string reason;  // why it was rejected; empty when accepted
};

struct MemoryRewrite {
  Rewritten rewritten;
  int64_t peak_before = 0, peak_after = 0;
  std::vector<SiteOutcome> accepted, rejected;
  std::vector<SkippedSite> skipped;  // FindSites' on the original graph
};

//! Greedy rewriting: sites in node order, each tried in every form of
//! FormsOf and kept in its best form only when the largest peak of the
//! regions it changes strictly drops (so the graph's peak never rises, and
//! a region that is not the graph's bottleneck still gets lower); sites
//! are found again after each rewrite (a kernel-wise rewrite can expose a
//! new concatenation), each tried once.
MemoryRewrite RewriteForMemory(const Graph& graph, const RegionPeaks& peaks,
                               const RewriteOptions& options = {});
//! The same with the graph as one region: a site is kept only when the
//! graph's peak strictly drops.
MemoryRewrite RewriteForMemory(const Graph& graph, const PeakFunction& peak,
                               const RewriteOptions& options = {});

}  // namespace ios::memory
