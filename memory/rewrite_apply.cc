// Applying one rewriting site (memory/rewrite.h): the readers replaced by
// partials and their combination, the graph reassembled with blocks and
// parts, and where each new convolution's weights come from.
#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "common/error.h"
#include "memory/rewrite.h"
#include "memory/rewrite_reader.h"

namespace ios::memory {
namespace {

using detail::ReaderPlan;

// A weight source of a new node, before the graph is assembled. `whole`:
// the original convolution unchanged (a reader's tail after the sum).
struct PendingSource {
  int chain_index = 0;  // in the new node
  exec::ConvSite from;  // in the graph being rewritten
  int out_begin = 0, out_end = 0, in_begin = 0, in_end = 0;
  bool bias = false;
  bool whole = false;
};

struct NewNode {
  Node node;
  int anchor = 0;  // goes right after this node of the old graph
  int part = -1;   // in the site's block
  std::vector<PendingSource> sources;
};

OpParams Chain(std::vector<OpParams> elements) {
  if (elements.empty()) return OpParams{};  // identity
  if (elements.size() == 1) return elements[0];
  OpParams op;
  op.kind = OpKind::kSequential;
  op.chain = std::move(elements);
  return op;
}

bool SameSite(const RewriteSite& a, const RewriteSite& b) {
  return a.concat == b.concat && a.readers == b.readers && a.rules == b.rules && a.terms == b.terms;
}

// Node references while rewriting: old ids below n, new node i as n + i.
class Rewriter {
 public:
  Rewriter(const Graph& graph, const RewriteSite& site, RewriteForm form)
      : graph_(graph),
        site_(site),
        form_(form),
        n_(static_cast<NodeId>(graph.nodes.size())),
        place_(detail::PlaceNodes(graph)),
        block_(place_.block.at(site.readers.at(0))),
        removed_(graph.nodes.size(), false),
        replacement_(graph.nodes.size(), -1) {}

  Rewritten Run() {
    for (NodeId r : site_.readers) RewriteReader(r);
    if (site_.concat >= 0) removed_.at(site_.concat) = true;
    return Assemble();
  }

 private:
  const Shape& OutputOf(NodeId ref) const {
    return ref < n_ ? graph_.node(ref).output : added_.at(ref - n_).node.output;
  }
  int AnchorOf(NodeId ref) const { return ref < n_ ? ref : added_.at(ref - n_).anchor; }
  int PartOf(NodeId ref) const {
    if (ref >= n_) return added_.at(ref - n_).part;
    // The block's entry comes before its first part.
    return place_.block.at(ref) == block_ ? std::max(0, place_.part.at(ref)) : 0;
  }
  Slice Whole(NodeId ref) const { return {ref, 0, OutputOf(ref).c}; }
  bool HasParts() const { return !graph_.blocks.at(static_cast<size_t>(block_)).parts.empty(); }

  NodeId Add(NewNode added) {
    std::vector<Shape> shapes;
    added.anchor = 0;
    added.part = HasParts() ? 0 : -1;
    for (const Term& term : added.node.inputs) {
      const Shape& p = OutputOf(term.at(0).producer);
      shapes.push_back({term[0].channels(), p.h, p.w});
      for (const Slice& s : term) {
        added.anchor = std::max(added.anchor, AnchorOf(s.producer));
        if (HasParts()) added.part = std::max(added.part, PartOf(s.producer));
      }
    }
    added.node.output = InferOpOutput(added.node.op, shapes, added.node.name);
    added_.push_back(std::move(added));
    return n_ + static_cast<NodeId>(added_.size()) - 1;
  }

  void RewriteReader(NodeId r) {
    const Node& reader = graph_.node(r);
    int in_channels = 0;
    for (const Term& t : site_.terms) in_channels += t.at(0).channels();
    std::string why;
    const auto planned = detail::PlanReader(reader.op, in_channels, &why);
    if (!planned) throw Error("rewrite: reader '" + reader.name + "': " + why);
    const ReaderPlan& plan = *planned;
    const int m = plan.multiplier;
    std::vector<NodeId> partials;
    int offset = 0;
    for (size_t i = 0; i < site_.terms.size(); ++i) {
      const int c = site_.terms[i].at(0).channels();
      NewNode p;
      p.node.name = reader.name + ".part" + std::to_string(i);
      p.node.hint = reader.hint.empty() ? "partial" : reader.hint + " partial";
      std::vector<OpParams> elements(plan.chain.begin(), plan.chain.begin() + plan.last + 1);
      if (plan.depthwise >= 0) {
        ConvParams& dw = elements[plan.depthwise].conv;
        dw.groups = c;
        dw.out_channels = m * c;
        p.sources.push_back(
            {plan.depthwise, {r, plan.depthwise}, m * offset, m * (offset + c), 0, 1, dw.bias});
      }
      if (plan.summed >= 0) {
        // The bias once, in the first partial; the activation after the sum.
        ConvParams& conv = elements[plan.summed].conv;
        conv.bias = conv.bias && i == 0;
        conv.act = Activation::kNone;
        const int scale = plan.depthwise >= 0 ? m : 1;
        p.sources.push_back({plan.summed,
                             {r, plan.summed},
                             0,
                             conv.out_channels,
                             scale * offset,
                             scale * (offset + c),
                             conv.bias});
      }
      p.node.op = Chain(std::move(elements));
      p.node.inputs = {site_.terms[i]};
      partials.push_back(Add(std::move(p)));
      offset += c;
    }

    // What follows the combination: the summed convolution's activation,
    // then the rest of the reader's chain.
    NewNode y;
    y.node.name = reader.name;
    y.node.hint = reader.hint;
    std::vector<OpParams> post;
    if (plan.summed >= 0 && plan.chain[plan.summed].conv.act != Activation::kNone) {
      OpParams act;
      act.kind = OpKind::kActivation;
      act.act = plan.chain[plan.summed].conv.act;
      post.push_back(act);
    }
    for (size_t e = static_cast<size_t>(plan.last) + 1; e < plan.chain.size(); ++e) {
      if (plan.chain[e].kind == OpKind::kConv) {
        PendingSource whole;
        whole.chain_index = static_cast<int>(post.size());
        whole.from = {r, static_cast<int>(e)};
        whole.whole = true;
        y.sources.push_back(whole);
      }
      post.push_back(plan.chain[e]);
    }
    y.node.op = Chain(std::move(post));
    const size_t k = partials.size();
    if (plan.rule == RewriteRule::kKernelWise) {
      for (NodeId p : partials) y.node.inputs.push_back({Whole(p)});
    } else if (form_ == RewriteForm::kChain && k >= 3) {
      NodeId sum = partials[0];
      for (size_t i = 1; i + 1 < k; ++i) {
        NewNode s;
        s.node.name = reader.name + ".sum" + std::to_string(i);
        s.node.hint = "partial sum";
        s.node.inputs = {{Whole(sum), Whole(partials[i])}};
        sum = Add(std::move(s));
      }
      y.node.inputs = {{Whole(sum), Whole(partials[k - 1])}};
    } else {
      Term all;
      for (NodeId p : partials) all.push_back(Whole(p));
      y.node.inputs = {all};
    }
    removed_.at(r) = true;
    replacement_.at(r) = Add(std::move(y));
  }

  // New names must not clash with the nodes kept (the readers' names pass
  // to their replacements).
  void UniqueNames() {
    std::set<std::string> taken;
    for (NodeId id = 0; id < n_; ++id) {
      if (!removed_[id]) taken.insert(graph_.node(id).name);
    }
    for (NewNode& a : added_) {
      std::string name = a.node.name;
      for (int i = 2; taken.count(name); ++i) name = a.node.name + "_" + std::to_string(i);
      a.node.name = name;
      taken.insert(name);
    }
  }

  Rewritten Assemble() {
    UniqueNames();
    std::vector<std::vector<NodeId>> after(static_cast<size_t>(n_));
    for (size_t a = 0; a < added_.size(); ++a) {
      after.at(added_[a].anchor).push_back(n_ + static_cast<NodeId>(a));
    }
    std::vector<NodeId> order;  // references in the new node order
    for (NodeId id = 0; id < n_; ++id) {
      if (!removed_[id]) order.push_back(id);
      order.insert(order.end(), after[id].begin(), after[id].end());
    }
    std::vector<NodeId> new_id(static_cast<size_t>(n_) + added_.size(), -1);
    for (size_t i = 0; i < order.size(); ++i) new_id.at(order[i]) = static_cast<NodeId>(i);
    auto map = [&](NodeId ref) {
      const NodeId to = ref < n_ && replacement_[ref] >= 0 ? replacement_[ref] : ref;
      if (new_id.at(to) < 0) throw Error("rewrite: node " + std::to_string(ref) + " was removed");
      return new_id[to];
    };

    Rewritten out;
    out.graph.name = graph_.name;
    for (NodeId ref : order) {
      Node node = ref < n_ ? graph_.node(ref) : added_.at(ref - n_).node;
      for (Term& term : node.inputs) {
        for (Slice& s : term) s.producer = map(s.producer);
      }
      out.graph.nodes.push_back(std::move(node));
    }

    for (size_t b = 0; b < graph_.blocks.size(); ++b) {
      const Block& old = graph_.blocks[b];
      Block block;
      block.enter = map(old.enter);
      block.exit = map(old.exit);
      auto members = [&](const std::vector<NodeId>& ids, int part) {
        std::vector<NodeId> kept;
        for (NodeId id : ids) {
          if (!removed_[id]) kept.push_back(map(id));
        }
        if (static_cast<int>(b) == block_) {
          for (size_t a = 0; a < added_.size(); ++a) {
            if (part < 0 || added_[a].part == part) {
              kept.push_back(new_id[n_ + static_cast<NodeId>(a)]);
            }
          }
        }
        std::sort(kept.begin(), kept.end());
        return kept;
      };
      for (NodeId id : members(old.Operators(), -1)) {
        if (id != block.exit) block.inner.push_back(id);
      }
      for (size_t q = 0; q < old.parts.size(); ++q) {
        std::vector<NodeId> part = members(old.parts[q], static_cast<int>(q));
        if (!part.empty()) block.parts.push_back(std::move(part));
      }
      out.graph.blocks.push_back(std::move(block));
    }
    InferShapes(out.graph);

    std::vector<NodeId> ref_of(out.graph.nodes.size());
    for (size_t i = 0; i < order.size(); ++i) ref_of[i] = order[i];
    detail::ForEachConv(
        out.graph, [&](exec::ConvSite to, const ConvParams& conv, int in_per_group) {
          const NodeId ref = ref_of.at(to.node);
          WeightSource source;
          source.to = to;
          source.out_end = conv.out_channels;
          source.in_end = in_per_group;
          source.bias = conv.bias;
          if (ref < n_) {
            source.from = {ref, to.chain_index};
            out.weights.push_back(source);
            return;
          }
          for (const PendingSource& p : added_.at(ref - n_).sources) {
            if (p.chain_index != to.chain_index) continue;
            source.from = p.from;
            if (!p.whole) {
              source.out_begin = p.out_begin;
              source.out_end = p.out_end;
              source.in_begin = p.in_begin;
              source.in_end = p.in_end;
              source.bias = p.bias;
            }
            out.weights.push_back(source);
            return;
          }
          throw Error("rewrite: no weights for convolution " + std::to_string(to.chain_index) +
                      " of '" + out.graph.node(to.node).name + "'");
        });
    return out;
  }

  const Graph& graph_;
  const RewriteSite& site_;
  RewriteForm form_;
  NodeId n_;
  detail::Placement place_;
  int block_;
  std::vector<bool> removed_;
  std::vector<NodeId> replacement_;  // per old reader: the reference replacing it
  std::vector<NewNode> added_;
};

}  // namespace

Rewritten Apply(const Graph& graph, const RewriteSite& site, RewriteForm form) {
  const SiteSearch search = FindSites(graph);
  if (std::none_of(search.sites.begin(), search.sites.end(),
                   [&](const RewriteSite& s) { return SameSite(s, site); })) {
    throw Error("rewrite of " + graph.name + ": the site is not one FindSites gives");
  }
  const std::vector<RewriteForm> forms = FormsOf(site);
  if (std::find(forms.begin(), forms.end(), form) == forms.end()) {
    throw Error("rewrite of " + graph.name + ": site " + DescribeSite(graph, site) +
                " cannot take the " + ToString(form) + " form");
  }
  return Rewriter(graph, site, form).Run();
}

Rewritten Apply(const Rewritten& current, const RewriteSite& site, RewriteForm form) {
  Rewritten next = Apply(current.graph, site, form);
  std::map<exec::ConvSite, const WeightSource*> before;
  for (const WeightSource& s : current.weights) before[s.to] = &s;
  for (WeightSource& s : next.weights) {
    const auto it = before.find(s.from);
    if (it == before.end()) {
      throw Error("rewrite of " + current.graph.name + ": convolution " +
                  std::to_string(s.from.chain_index) + " of node " + std::to_string(s.from.node) +
                  " has no weight source");
    }
    const WeightSource& prev = *it->second;
    s.from = prev.from;
    s.out_begin += prev.out_begin;
    s.out_end += prev.out_begin;
    s.in_begin += prev.in_begin;
    s.in_end += prev.in_begin;
    s.bias = s.bias && prev.bias;
  }
  return next;
}

}  // namespace ios::memory
