// Weights of a rewritten graph, and the greedy search that keeps the
// rewrites lowering the peak (memory/rewrite.h).
#include <algorithm>
#include <limits>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "common/error.h"
#include "memory/rewrite.h"
#include "memory/rewrite_reader.h"

namespace ios::memory {

Rewritten Unchanged(const Graph& graph) {
  Rewritten out{graph, {}};
  detail::ForEachConv(graph, [&](exec::ConvSite site, const ConvParams& conv, int in_per_group) {
    out.weights.push_back({site, site, 0, conv.out_channels, 0, in_per_group, conv.bias});
  });
  return out;
}

exec::WeightStore DeriveWeights(const Graph& original, const exec::WeightStore& original_weights,
                                const Rewritten& rewritten) {
  exec::WeightStore store;
  for (const WeightSource& s : rewritten.weights) {
    const std::string where = "rewritten weights of " + rewritten.graph.name + ": '" +
                              rewritten.graph.node(s.to.node).name + "' convolution " +
                              std::to_string(s.to.chain_index) + " from '" +
                              original.node(s.from.node).name + "' convolution " +
                              std::to_string(s.from.chain_index);
    const exec::ConvWeights& w = original_weights.At(s.from);
    if (s.out_begin < 0 || s.out_end > w.out_channels || s.out_begin >= s.out_end ||
        s.in_begin < 0 || s.in_end > w.in_per_group || s.in_begin >= s.in_end) {
      throw Error(where + ": output channels [" + std::to_string(s.out_begin) + ", " +
                  std::to_string(s.out_end) + ") and input channels [" +
                  std::to_string(s.in_begin) + ", " + std::to_string(s.in_end) +
                  ") do not fit its kernel of " + std::to_string(w.out_channels) + " x " +
                  std::to_string(w.in_per_group));
    }
    exec::ConvWeights cut;
    cut.out_channels = s.out_end - s.out_begin;
    cut.in_per_group = s.in_end - s.in_begin;
    cut.kernel_h = w.kernel_h;
    cut.kernel_w = w.kernel_w;
    const size_t taps = static_cast<size_t>(w.kernel_h) * w.kernel_w;
    cut.kernel.reserve(static_cast<size_t>(cut.out_channels) * cut.in_per_group * taps);
    for (int o = s.out_begin; o < s.out_end; ++o) {
      const auto row =
          w.kernel.begin() +
          static_cast<std::ptrdiff_t>(
              (static_cast<size_t>(o) * w.in_per_group + static_cast<size_t>(s.in_begin)) * taps);
      cut.kernel.insert(cut.kernel.end(), row,
                        row + static_cast<std::ptrdiff_t>(cut.in_per_group * taps));
    }
    if (s.bias && !w.bias.empty()) {
      cut.bias.assign(w.bias.begin() + s.out_begin, w.bias.begin() + s.out_end);
    }
    store.Set(s.to, std::move(cut));
  }
  return store;
}

namespace {

// Identifies a site across rewrites (ids change, names stay).
std::string SiteKey(const Graph& graph, const RewriteSite& site) {
  return site.concat >= 0 ? "concat " + graph.node(site.concat).name
                          : "reader " + graph.node(site.readers.at(0)).name;
}

bool Allowed(const RewriteSite& site, const RewriteOptions& options) {
  for (RewriteRule rule : site.rules) {
    if (rule != RewriteRule::kKernelWise && !options.channel_wise) return false;
    if (rule != RewriteRule::kChannelWise && !options.kernel_wise) return false;
  }
  return true;
}

int64_t Largest(const std::vector<int64_t>& peaks) {
  return peaks.empty() ? 0 : *std::max_element(peaks.begin(), peaks.end());
}

// The largest peak of the regions that differ, before and after; the whole
// graph's when the regions do not correspond. Equal when nothing changed.
std::pair<int64_t, int64_t> Local(const std::vector<int64_t>& before,
                                  const std::vector<int64_t>& after) {
  if (before.size() != after.size()) return {Largest(before), Largest(after)};
  constexpr int64_t kNone = std::numeric_limits<int64_t>::min();
  std::pair<int64_t, int64_t> local{kNone, kNone};
  for (size_t i = 0; i < before.size(); ++i) {
    if (before[i] == after[i]) continue;
    local.first = std::max(local.first, before[i]);
    local.second = std::max(local.second, after[i]);
  }
  if (local.first == kNone) return {0, 0};
  return local;
}

}  // namespace

MemoryRewrite RewriteForMemory(const Graph& graph, const RegionPeaks& peaks,
                               const RewriteOptions& options) {
  MemoryRewrite out;
  out.rewritten = Unchanged(graph);
  out.skipped = FindSites(graph).skipped;
  std::vector<int64_t> current = peaks(graph);
  out.peak_before = Largest(current);
  std::set<std::string> tried;
  int attempts = 0;
  for (;;) {
    const Graph& g = out.rewritten.graph;
    const SiteSearch search = FindSites(g);
    const auto next = std::find_if(search.sites.begin(), search.sites.end(),
                                   [&](const auto& s) { return !tried.count(SiteKey(g, s)); });
    if (next == search.sites.end()) break;
    const RewriteSite& site = *next;
    tried.insert(SiteKey(g, site));
    SiteOutcome outcome;
    outcome.site = DescribeSite(g, site);
    outcome.peak_before = outcome.peak_after = Largest(current);
    if (!Allowed(site, options)) {
      outcome.reason = "its rule is turned off";
      out.rejected.push_back(std::move(outcome));
      continue;
    }
    if (attempts >= options.max_sites) {
      outcome.reason = "over the budget of " + std::to_string(options.max_sites) + " sites tried";
      out.rejected.push_back(std::move(outcome));
      continue;
    }
    ++attempts;
    std::optional<Rewritten> best;
    std::vector<int64_t> best_peaks;
    std::string tried_forms;
    for (RewriteForm form : FormsOf(site)) {
      Rewritten candidate = Apply(out.rewritten, site, form);
      std::vector<int64_t> p = peaks(candidate.graph);
      const auto [before, after] = Local(current, p);
      tried_forms += std::string(tried_forms.empty() ? "" : ", ") + ToString(form) + " " +
                     std::to_string(before) + " -> " + std::to_string(after);
      if (!best || after < outcome.local_after ||
          (after == outcome.local_after && Largest(p) < outcome.peak_after)) {
        outcome.local_before = before;
        outcome.local_after = after;
        outcome.peak_after = Largest(p);
        outcome.form = form;
        best = std::move(candidate);
        best_peaks = std::move(p);
      }
    }
    if (outcome.local_after < outcome.local_before) {
      current = std::move(best_peaks);
      out.rewritten = std::move(*best);
      out.accepted.push_back(std::move(outcome));
    } else {
      outcome.reason =
          "the largest peak of the regions it changes does not drop (" + tried_forms + ")";
      out.rejected.push_back(std::move(outcome));
    }
  }
  out.peak_after = Largest(current);
  return out;
}

MemoryRewrite RewriteForMemory(const Graph& graph, const PeakFunction& peak,
                               const RewriteOptions& options) {
  return RewriteForMemory(
      graph, [&](const Graph& g) { return std::vector<int64_t>{peak(g)}; }, options);
}

RegionPeaks LeastPeakRegionPeaks(const NetworkOrderOptions& options) {
  return [options](const Graph& graph) {
    // The order cuts a grown part further: each of the graph's own regions
    // gets the largest peak of the order's parts that hold its operators, so
    // the regions still correspond one to one across rewrites.
    const detail::Placement place = detail::PlaceNodes(graph);
    std::vector<size_t> first(graph.blocks.size() + 1, 0);
    for (size_t b = 0; b < graph.blocks.size(); ++b) {
      first[b + 1] = first[b] + std::max<size_t>(1, graph.blocks[b].parts.size());
    }
    std::vector<int64_t> peaks(first.back() + 1, 0);  // the last: operators in no block
    const NetworkOrder order = OptimalNetworkOrder(graph, options);
    for (const PartOrderRecord& part : order.parts) {
      for (NodeId id : part.order) {
        const int block = place.block.at(static_cast<size_t>(id));
        const size_t region =
            block < 0
                ? first.back()
                : first[static_cast<size_t>(block)] +
                      static_cast<size_t>(std::max(0, place.part.at(static_cast<size_t>(id))));
        peaks[region] = std::max(peaks[region], part.peak_bytes);
      }
    }
    return peaks;
  };
}

}  // namespace ios::memory
