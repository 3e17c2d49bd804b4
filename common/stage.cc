#include "common/stage.h"

#include <algorithm>
#include <numeric>
#include <string>
#include <unordered_map>
#include <utility>

#include "common/error.h"
#include "common/limits.h"
#include "common/stage_spec_text.h"

namespace ios {

const char* ToString(Strategy strategy) {
  return strategy == Strategy::kMerge ? "merge" : "parallel";
}

int Stage::OperatorCount() const {
  int n = 0;
  for (const auto& g : groups) n += static_cast<int>(g.size());
  return n;
}

int StageSpec::OperatorCount() const {
  int n = 0;
  for (const auto& g : groups) n += static_cast<int>(g.size());
  return n;
}

namespace {

using detail::AppendInt;
using detail::AppendOpKey;
using detail::AppendRange;
using detail::AppendShape;

// One op in a group's local description: internal inputs by position among
// the ops placed so far, external ones by first use inside the group (new
// ones numbered from externals.size(), in order) plus their shape.
void DescribeOpLocally(const Graph& graph, NodeId id, const std::vector<NodeId>& placed,
                       const std::vector<NodeId>& externals,
                       const std::vector<std::string>& op_text,
                       const std::vector<std::string>& shape_text, std::string& out,
                       std::vector<NodeId>& fresh) {
  out += op_text[id];
  out += '<';
  fresh.clear();
  for (const Term& term : graph.node(id).inputs) {
    for (const Slice& s : term) {
      const auto local = std::find(placed.begin(), placed.end(), s.producer);
      if (local != placed.end()) {
        out += 'L';
        AppendInt(out, static_cast<int>(local - placed.begin()));
      } else {
        int index;
        if (auto ext = std::find(externals.begin(), externals.end(), s.producer);
            ext != externals.end()) {
          index = static_cast<int>(ext - externals.begin());
        } else {
          auto f = std::find(fresh.begin(), fresh.end(), s.producer);
          if (f == fresh.end()) f = fresh.insert(fresh.end(), s.producer);
          index = static_cast<int>(externals.size() + (f - fresh.begin()));
        }
        out += 'X';
        AppendInt(out, index);
        out += ':';
        out += shape_text[s.producer];
      }
      AppendRange(out, s.begin, s.end);
    }
    out += '|';
  }
  out += '>';
}

// What `id` feeds inside the group: each consumer's op and the input slot
// it reads `id` in, sorted.
std::string ForwardSignature(const Graph& graph, const std::vector<NodeId>& nodes, NodeId id,
                             const std::vector<std::string>& op_text) {
  std::vector<std::string> uses;
  for (NodeId c : nodes) {
    const Inputs& inputs = graph.node(c).inputs;
    for (size_t t = 0; t < inputs.size(); ++t) {
      for (size_t k = 0; k < inputs[t].size(); ++k) {
        const Slice& s = inputs[t][k];
        if (s.producer != id) continue;
        std::string use = op_text[c];
        use += '@';
        AppendInt(use, static_cast<int>(t));
        use += '.';
        AppendInt(use, static_cast<int>(k));
        AppendRange(use, s.begin, s.end);
        uses.push_back(std::move(use));
      }
    }
  }
  std::sort(uses.begin(), uses.end());
  std::string out;
  for (const std::string& u : uses) out += u + ';';
  return out;
}

// Puts a group's ops in canonical order and describes the group without
// reference to other groups. The order is topological; among ops ready at
// the same time the one with the smallest description goes first, so the
// order does not depend on node numbering. `externals` receives the group's
// outside inputs in order of first use.
void CanonicalizeGroup(const Graph& graph, std::vector<NodeId>& nodes,
                       const detail::NodeTexts& texts, std::string& sig,
                       std::vector<NodeId>& externals, detail::KeyScratch& scratch) {
  const std::vector<std::string>& op_text = texts.op;
  const std::vector<std::string>& shape_text = texts.shape;
  sig.clear();
  externals.clear();
  std::sort(nodes.begin(), nodes.end());  // graph order is topological
  std::vector<NodeId>& placed = scratch.placed;
  std::vector<NodeId>& fresh = scratch.fresh;
  std::vector<NodeId>& chosen_fresh = scratch.chosen_fresh;
  std::string& best = scratch.best;
  std::string& candidate = scratch.candidate;
  placed.clear();
  while (placed.size() < nodes.size()) {
    NodeId chosen = -1;
    for (NodeId id : nodes) {
      if (std::find(placed.begin(), placed.end(), id) != placed.end()) continue;
      bool ready = true;
      for (const Term& term : graph.node(id).inputs) {
        for (const Slice& s : term) {
          if (std::find(nodes.begin(), nodes.end(), s.producer) != nodes.end() &&
              std::find(placed.begin(), placed.end(), s.producer) == placed.end()) {
            ready = false;
          }
        }
      }
      if (!ready) continue;
      candidate.clear();
      DescribeOpLocally(graph, id, placed, externals, op_text, shape_text, candidate, fresh);
      // Identical ready ops differ only in what they feed: look one step on.
      const bool better =
          chosen < 0 || candidate < best ||
          (candidate == best && ForwardSignature(graph, nodes, id, op_text) <
                                    ForwardSignature(graph, nodes, chosen, op_text));
      if (better) {
        chosen = id;
        best.swap(candidate);
        chosen_fresh.swap(fresh);
      }
    }
    sig += best;
    placed.push_back(chosen);
    externals.insert(externals.end(), chosen_fresh.begin(), chosen_fresh.end());
  }
  nodes.swap(placed);
}

// The key text of a canonical group with its outside inputs left open (see
// detail::GroupForm): what StageKeyer::Key writes for the group, but for
// the stage-wide input numbers.
void FillFormBody(const Graph& graph, const detail::NodeTexts& texts, detail::GroupForm& form) {
  form.body.clear();
  form.holes.clear();
  const std::vector<NodeId>& nodes = form.nodes;
  for (NodeId id : nodes) {
    form.body += texts.op[id];
    form.body += '<';
    for (const Term& term : graph.node(id).inputs) {
      for (const Slice& s : term) {
        const auto local = std::find(nodes.begin(), nodes.end(), s.producer);
        if (local != nodes.end()) {
          form.body += 'L';
          AppendInt(form.body, static_cast<int>(local - nodes.begin()));
        } else {
          form.body += 'X';
          const auto outside = std::find(form.externals.begin(), form.externals.end(), s.producer);
          form.holes.emplace_back(static_cast<uint32_t>(form.body.size()),
                                  static_cast<uint32_t>(outside - form.externals.begin()));
        }
        AppendRange(form.body, s.begin, s.end);
      }
      form.body += '|';
    }
    form.body += '>';
  }
}

// The canonical form of the group of operators `nodes` (any order).
detail::GroupForm MakeGroupForm(const Graph& graph, std::vector<NodeId> nodes,
                                const detail::NodeTexts& texts, detail::KeyScratch& scratch) {
  detail::GroupForm form;
  CanonicalizeGroup(graph, nodes, texts, form.signature, form.externals, scratch);
  form.nodes = std::move(nodes);
  FillFormBody(graph, texts, form);
  return form;
}

// Every node's op and shape text, and its form as a group of its own.
detail::NodeTexts MakeNodeTexts(const Graph& graph) {
  const size_t n = graph.nodes.size();
  detail::NodeTexts texts;
  texts.op.resize(n);
  texts.shape.resize(n);
  for (size_t i = 0; i < n; ++i) {
    AppendOpKey(texts.op[i], graph.nodes[i].op);
    AppendShape(texts.shape[i], graph.nodes[i].output);
  }
  detail::KeyScratch scratch;
  texts.single.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    texts.single.push_back(MakeGroupForm(graph, {static_cast<NodeId>(i)}, texts, scratch));
  }
  return texts;
}

uint64_t HashNodes(const std::vector<NodeId>& sorted) {
  uint64_t h = 0x9e3779b97f4a7c15ULL ^ sorted.size();
  for (NodeId id : sorted) {
    h ^= static_cast<uint64_t>(static_cast<uint32_t>(id));
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 32;
  }
  return h;
}

// The form of one group of a stage: a single operator's is prepared in
// `texts`, a larger group's comes from `cache` or is made and kept there.
const detail::GroupForm* FormOf(const Graph& graph, const std::vector<NodeId>& group,
                                const detail::NodeTexts& texts, detail::GroupFormCache& cache,
                                detail::KeyScratch& scratch) {
  if (group.empty()) throw Error("stage has an empty group");
  if (group.size() == 1) {
    const NodeId id = group[0];
    if (id < 0 || static_cast<size_t>(id) >= texts.single.size()) {
      throw Error("stage names node " + std::to_string(id) + ", which is not in the graph");
    }
    return &texts.single[id];
  }
  std::vector<NodeId>& sorted = scratch.sorted_nodes;
  sorted.assign(group.begin(), group.end());
  std::sort(sorted.begin(), sorted.end());
  const uint64_t hash = HashNodes(sorted);
  if (const detail::GroupForm* form = cache.Find(sorted, hash)) return form;
  return cache.Add(sorted, hash, MakeGroupForm(graph, sorted, texts, scratch));
}

using detail::GroupForm;

// Groups sorted by their local description: the canonical group order. When
// two groups look alike on their own, what their outside inputs are shared
// with decides (each input is coloured by its shape and by which groups read
// it, at which local position), so the order does not depend on names.
void CanonicalGroups(const Graph& graph, const Stage& stage, const detail::NodeTexts& texts,
                     detail::GroupFormCache& cache, std::vector<const GroupForm*>& groups,
                     detail::KeyScratch& scratch) {
  cache.MakeRoom();
  groups.clear();
  for (const std::vector<NodeId>& group : stage.groups) {
    groups.push_back(FormOf(graph, group, texts, cache, scratch));
  }
  auto by_signature = [](const GroupForm* a, const GroupForm* b) {
    return a != b && a->signature < b->signature;
  };
  std::sort(groups.begin(), groups.end(), by_signature);
  bool tied = false;
  for (size_t g = 1; g < groups.size(); ++g) {
    tied |= groups[g]->signature == groups[g - 1]->signature;
  }
  if (!tied) return;
  // Each use of an outside input: "signature#position" of the group reading
  // it. Buffers come from `scratch` (keying a stage allocates nothing).
  std::vector<std::string>& uses = scratch.uses;
  std::vector<std::pair<NodeId, size_t>>& use_refs = scratch.use_refs;  // (input, index in uses)
  use_refs.clear();
  for (const GroupForm* group : groups) {
    for (size_t j = 0; j < group->externals.size(); ++j) {
      if (uses.size() <= use_refs.size()) uses.emplace_back();
      std::string& use = uses[use_refs.size()];
      use.assign(group->signature);
      use += '#';
      AppendInt(use, static_cast<int>(j));
      use_refs.emplace_back(group->externals[j], use_refs.size());
    }
  }
  // By input, then by use text: each input's uses, sorted, side by side.
  std::sort(use_refs.begin(), use_refs.end(), [&](const auto& a, const auto& b) {
    return a.first != b.first ? a.first < b.first : uses[a.second] < uses[b.second];
  });
  std::vector<std::string>& refined = scratch.refined;
  if (refined.size() < groups.size()) refined.resize(groups.size());
  for (size_t g = 0; g < groups.size(); ++g) {
    refined[g].assign(groups[g]->signature);
    for (NodeId e : groups[g]->externals) {
      refined[g] += '{';
      auto use = std::lower_bound(use_refs.begin(), use_refs.end(), e,
                                  [](const auto& ref, NodeId input) { return ref.first < input; });
      for (; use != use_refs.end() && use->first == e; ++use) {
        refined[g] += uses[use->second];
        refined[g] += ';';
      }
      refined[g] += '}';
    }
  }
  // Groups still alike after refinement are symmetric up to which outside
  // tensor is which: place them one at a time, each time taking the one
  // whose description with the input numbering so far is smallest.
  std::vector<size_t>& remaining = scratch.remaining;
  remaining.resize(groups.size());
  std::iota(remaining.begin(), remaining.end(), 0);
  std::stable_sort(remaining.begin(), remaining.end(),
                   [&](size_t a, size_t b) { return refined[a] < refined[b]; });
  std::vector<NodeId>& numbering =
      scratch.numbering;  // outside tensors in order of first use so far
  numbering.clear();
  std::vector<const GroupForm*>& sorted = scratch.sorted;
  sorted.clear();
  std::string& best = scratch.best;
  std::string& text = scratch.candidate;
  while (!remaining.empty()) {
    size_t pick = 0;
    if (remaining.size() > 1 && refined[remaining[0]] == refined[remaining[1]]) {
      for (size_t i = 0; i < remaining.size() && refined[remaining[i]] == refined[remaining[0]];
           ++i) {
        text.clear();
        for (NodeId e : groups[remaining[i]]->externals) {
          const auto at = std::find(numbering.begin(), numbering.end(), e);
          AppendInt(text, at == numbering.end() ? -1 : static_cast<int>(at - numbering.begin()));
          text += ',';
        }
        if (i == 0 || text < best) {
          best.assign(text);
          pick = i;
        }
      }
    }
    const GroupForm* chosen = groups[remaining[pick]];
    for (NodeId e : chosen->externals) {
      if (std::find(numbering.begin(), numbering.end(), e) == numbering.end())
        numbering.push_back(e);
    }
    sorted.push_back(chosen);
    remaining.erase(remaining.begin() + static_cast<std::ptrdiff_t>(pick));
  }
  groups.swap(sorted);
}

Strategy EffectiveStrategy(const Stage& stage) {
  return stage.OperatorCount() == 1 ? Strategy::kParallel : stage.strategy;
}

}  // namespace

StageSpec MakeStageSpec(const Graph& graph, const Stage& stage) {
  return StageKeyer(graph).Spec(stage);
}

StageSpec StageKeyer::Spec(const Stage& stage) { return std::move(Bind(stage).spec); }

BoundStage StageKeyer::Bind(const Stage& stage) {
  const Graph& graph = graph_;
  BoundStage bound;
  StageSpec& spec = bound.spec;
  StageBinding& binding = bound.binding;
  spec.strategy = EffectiveStrategy(stage);
  if (spec.strategy == Strategy::kMerge) {
    std::vector<NodeId> all;
    for (const auto& g : stage.groups) all.insert(all.end(), g.begin(), g.end());
    if (!CanMerge(graph, all)) {
      throw Error("stage is not mergeable: " + detail::WhyNotMergeable(graph, all));
    }
  }
  CanonicalGroups(graph, stage, texts_, forms_, groups_, buffers_);
  std::unordered_map<NodeId, int> external_index;
  for (const GroupForm* group : groups_) {
    const std::vector<NodeId>& nodes = group->nodes;
    std::vector<StageOp> ops;
    for (NodeId id : nodes) {
      const Node& node = graph.node(id);
      StageOp op{node.op, {}, node.output};
      for (const Term& term : node.inputs) {
        std::vector<SliceRef> refs;
        for (const Slice& s : term) {
          const auto local = std::find(nodes.begin(), nodes.end(), s.producer);
          if (local != nodes.end()) {
            refs.push_back({false, static_cast<int>(local - nodes.begin()), s.begin, s.end});
            continue;
          }
          auto [ext, inserted] =
              external_index.emplace(s.producer, static_cast<int>(spec.externals.size()));
          if (inserted) {
            spec.externals.push_back(graph.node(s.producer).output);
            binding.externals.push_back(s.producer);
          }
          refs.push_back({true, ext->second, s.begin, s.end});
        }
        op.inputs.push_back(std::move(refs));
      }
      ops.push_back(std::move(op));
    }
    spec.groups.push_back(std::move(ops));
    binding.groups.push_back(nodes);
  }
  return bound;
}

StageKeyer::StageKeyer(const Graph& graph) : graph_(graph), texts_(MakeNodeTexts(graph)) {}

// Must produce exactly StageSpec::Key() of MakeStageSpec(graph, stage).
const std::string& StageKeyer::Key(const Stage& stage) {
  CanonicalGroups(graph_, stage, texts_, forms_, groups_, buffers_);
  // The stage's outside inputs in order of first use, and per group the
  // stage-wide number of each of its own.
  std::vector<NodeId>& externals = externals_;
  std::vector<uint32_t>& numbers = buffers_.external_numbers;
  std::vector<uint32_t>& offsets = buffers_.number_offsets;
  externals.clear();
  numbers.clear();
  offsets.clear();
  for (const GroupForm* group : groups_) {
    offsets.push_back(static_cast<uint32_t>(numbers.size()));
    for (NodeId e : group->externals) {
      auto at = std::find(externals.begin(), externals.end(), e);
      if (at == externals.end()) at = externals.insert(at, e);
      numbers.push_back(static_cast<uint32_t>(at - externals.begin()));
    }
  }
  std::string& key = key_;
  key = "v1;";
  key += ToString(EffectiveStrategy(stage));
  key += ";in=";
  for (NodeId e : externals) {
    key += texts_.shape[e];
    key += ',';
  }
  for (size_t g = 0; g < groups_.size(); ++g) {
    const GroupForm& form = *groups_[g];
    key += ";g=";
    size_t done = 0;
    for (const auto& [offset, input] : form.holes) {
      key.append(form.body, done, offset - done);
      AppendInt(key, static_cast<int>(numbers[offsets[g] + input]));
      done = offset;
    }
    key.append(form.body, done, std::string::npos);
  }
  return key;
}

const std::string& StageKeyer::OrderedKey(const std::vector<NodeId>& ops) {
  std::string& key = key_;
  std::vector<NodeId>& externals = externals_;
  key = "ops;";
  externals.clear();
  for (NodeId id : ops) {
    key += texts_.op[id];
    key += '=';
    key += texts_.shape[id];
    key += '<';
    for (const Term& term : graph_.node(id).inputs) {
      for (const Slice& s : term) {
        if (const auto local = std::find(ops.begin(), ops.end(), s.producer); local != ops.end()) {
          key += 'L';
          AppendInt(key, static_cast<int>(local - ops.begin()));
        } else {
          auto outside = std::find(externals.begin(), externals.end(), s.producer);
          if (outside == externals.end()) outside = externals.insert(outside, s.producer);
          key += 'X';
          AppendInt(key, static_cast<int>(outside - externals.begin()));
          key += ':';
          key += texts_.shape[s.producer];
        }
        AppendRange(key, s.begin, s.end);
      }
      key += '|';
    }
    key += ">;";
  }
  return key;
}

}  // namespace ios

namespace ios::detail {

void GroupFormCache::MakeRoom() {
  if (entries_.size() < kMaxForms) return;
  entries_.clear();
  std::fill(slots_.begin(), slots_.end(), 0);
}

const GroupForm* GroupFormCache::Find(const std::vector<NodeId>& sorted, uint64_t hash) const {
  if (slots_.empty()) return nullptr;
  const size_t mask = slots_.size() - 1;
  for (size_t i = hash & mask;; i = (i + 1) & mask) {
    const uint32_t slot = slots_[i];
    if (slot == 0) return nullptr;
    const Entry& entry = entries_[slot - 1];
    if (entry.hash == hash && entry.sorted == sorted) return &entry.form;
  }
}

const GroupForm* GroupFormCache::Add(const std::vector<NodeId>& sorted, uint64_t hash,
                                     GroupForm&& form) {
  if ((entries_.size() + 1) * 2 > slots_.size()) Grow();
  entries_.push_back({sorted, hash, std::move(form)});
  const size_t mask = slots_.size() - 1;
  size_t i = hash & mask;
  while (slots_[i] != 0) i = (i + 1) & mask;
  slots_[i] = static_cast<uint32_t>(entries_.size());
  return &entries_.back().form;
}

void GroupFormCache::Grow() {
  slots_.assign(std::max<size_t>(64, slots_.size() * 2), 0);
  const size_t mask = slots_.size() - 1;
  for (size_t e = 0; e < entries_.size(); ++e) {
    size_t i = entries_[e].hash & mask;
    while (slots_[i] != 0) i = (i + 1) & mask;
    slots_[i] = static_cast<uint32_t>(e + 1);
  }
}

}  // namespace ios::detail