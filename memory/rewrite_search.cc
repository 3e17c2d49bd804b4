// Weights of a rewritten graph, and the greedy search that keeps the
// rewrites lowering the peak (memory/rewrite.h).
#include <algorithm>
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

}  // namespace

MemoryRewrite RewriteForMemory(const Graph& graph, const PeakFunction& peak,
                               const RewriteOptions& options) {
  MemoryRewrite out;
  out.rewritten = Unchanged(graph);
  out.skipped = FindSites(graph).skipped;
  out.peak_before = peak(graph);
  int64_t current = out.peak_before;
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
    outcome.peak_before = current;
    outcome.peak_after = current;
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
    std::string tried_forms;
    for (RewriteForm form : FormsOf(site)) {
      Rewritten candidate = Apply(out.rewritten, site, form);
      const int64_t p = peak(candidate.graph);
      tried_forms +=
          std::string(tried_forms.empty() ? "" : ", ") + ToString(form) + " " + std::to_string(p);
      if (!best || p < outcome.peak_after) {
        outcome.peak_after = p;
        outcome.form = form;
        best = std::move(candidate);
      }
    }
    if (outcome.peak_after < current) {
      current = outcome.peak_after;
      out.rewritten = std::move(*best);
      out.accepted.push_back(std::move(outcome));
    } else {
      outcome.reason =
          "the peak does not drop below " + std::to_string(current) + " (" + tried_forms + ")";
      out.rejected.push_back(std::move(outcome));
    }
  }
  out.peak_after = current;
  return out;
}

}  // namespace ios::memory
