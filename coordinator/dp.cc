#include "coordinator/dp.h"

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <utility>
#include <vector>

#include "common/error.h"
#include "common/limits.h"
#include "common/part_dag.h"

namespace ios::coordinator {

const char* ToString(DpBudget budget) {
  switch (budget) {
    case DpBudget::kStates:
      return "states";
    case DpBudget::kTransitions:
      return "transitions";
    case DpBudget::kStages:
      return "stages";
  }
  return "?";
}

namespace {

std::string DescribeExceeded(DpBudget budget, int64_t limit, double needed, bool lower_bound,
                             int operators) {
  char text[256];
  if (lower_bound) {
    std::snprintf(text, sizeof text,
                  "DP budget exceeded: a part of %d operators needs at least %.3g %s (its widest "
                  "antichain alone), more than the budget of %lld",
                  operators, needed, ToString(budget), static_cast<long long>(limit));
  } else {
    std::snprintf(text, sizeof text,
                  "DP budget exceeded: a part of %d operators has more than %lld %s", operators,
                  static_cast<long long>(limit), ToString(budget));
  }
  return text;
}

}  // namespace

DpBudgetExceeded::DpBudgetExceeded(DpBudget budget, int64_t limit, double needed, bool lower_bound,
                                   int operators)
    : Error(DescribeExceeded(budget, limit, needed, lower_bound, operators)),
      budget_(budget),
      limit_(limit) {}

uint32_t NarrowId(uint64_t value, const char* what) {
  if (value > std::numeric_limits<uint32_t>::max()) {
    throw Error(std::string("DP ") + what + " id " + std::to_string(value) +
                " does not fit in 32 bits (budgets should have stopped the walk earlier)");
  }
  return static_cast<uint32_t>(value);
}

const char* ToString(StrategySet strategies) {
  switch (strategies) {
    case StrategySet::kParallel:
      return "parallel";
    case StrategySet::kMerge:
      return "merge";
    case StrategySet::kBoth:
      return "both";
  }
  return "?";
}

// Holds the per-part tables (in local indices 0..n-1, topological) while the
// state space is walked depth-first from the full part.
class PartSpace::Builder {
 public:
  Builder(const Graph& graph, const DpOptions& options, PartSpace& out,
          const DpProgressFn& progress)
      : graph_(graph),
        options_(options),
        out_(out),
        n_(static_cast<int>(out.part_.size())),
        progress_(progress) {
    BuildEdges();
    BuildChains();
    BuildMergeClasses();
  }

  // Refuses a part that is over budget for sure, before walking it. Every
  // subset T of an antichain A is the set of maximal operators of a state
  // reachable from the whole part, and every subset of T of at most s
  // operators is a concurrent ending of that state (each op alone in its
  // group); so a width of w gives at least 2^w - 1 states and
  // sum_k C(w,k) * sum_{j<=min(s,k)} C(k,j) transitions.
  void CheckLowerBounds() const {
    const int w = MaxAntichain();
    const int s = options_.strategies == StrategySet::kMerge ? 1 : options_.max_groups;
    std::vector<double> binom(w + 1, 1.0);  // C(w, k)
    for (int k = 1; k <= w; ++k) binom[k] = binom[k - 1] * (w - k + 1) / k;
    double transitions = 0, stages = 0;
    for (int k = 0; k <= w; ++k) {
      double endings = 0, c = 1;  // c = C(k, j)
      for (int j = 1; j <= std::min(s, k); ++j) {
        c = c * (k - j + 1) / j;
        endings += c;
      }
      transitions += binom[k] * endings;
      if (k >= 1 && k <= s) stages += binom[k];
    }
    if (options_.strategies == StrategySet::kMerge) stages = w;  // merge-only: the single ops
    const double states = std::ldexp(1.0, w) - 1;
    auto check = [&](DpBudget budget, double needed, int64_t limit) {
      if (needed > static_cast<double>(limit))
        throw DpBudgetExceeded(budget, limit, needed, true, n_);
    };
    check(DpBudget::kStates, states, options_.max_states);
    check(DpBudget::kTransitions, transitions, options_.max_transitions);
    check(DpBudget::kStages, stages, options_.max_stages);
  }

  // The schedule the budget fallback uses: every ready op in one stage.
  // Stored as a one-path space: state i is the set of the first i stages'
  // operators, its one transition the i-th stage.
  void RunGreedy() {
    std::vector<uint64_t> predecessors(n_, 0);
    for (int u = 0; u < n_; ++u) {
      for (uint64_t rest = successors_[u]; rest; rest &= rest - 1) {
        predecessors[std::countr_zero(rest)] |= OpBit(u);
      }
    }
    out_.states_.push_back({0, 0, 0});
    out_.solve_order_.push_back(0);
    uint64_t done = 0;
    const uint64_t full = LowMask(n_);
    while (done != full) {
      uint64_t stage = 0;
      int groups = 0;
      for (int u = 0; u < n_; ++u) {
        if (!(done & OpBit(u)) && (predecessors[u] & ~done) == 0) {
          stage |= OpBit(u);
          ++groups;
        }
      }
      out_.width_ = std::max(out_.width_, groups);
      const uint32_t previous = NarrowId(out_.states_.size() - 1, "state");
      const uint32_t transition = NarrowId(out_.transitions_.size(), "transition");
      out_.transitions_.push_back({StageId(Strategy::kParallel, stage), previous});
      done |= stage;
      const uint32_t index = NarrowId(out_.states_.size(), "state");
      out_.states_.push_back({done, transition, transition + 1});
      out_.solve_order_.push_back(index);
    }
    out_.root_ = static_cast<uint32_t>(out_.states_.size() - 1);
    out_.schedule_count_ = 1;
  }

  void Run() {
    last_report_ = start_;
    out_.states_.push_back({0, 0, 0});  // the empty state
    state_index_.Emplace(0, 0);
    out_.solve_order_.push_back(0);
    const uint64_t full = LowMask(n_);
    out_.root_ = Visit(full);
    // Paths from each state to the empty one, in solve order.
    std::vector<double> paths(out_.states_.size(), 0.0);
    paths[0] = 1.0;
    for (uint32_t s : out_.solve_order_) {
      const State& st = out_.states_[s];
      for (uint32_t t = st.first_transition; t < st.transition_end; ++t) {
        paths[s] += paths[out_.transitions_[t].next_state];
      }
    }
    out_.schedule_count_ = paths[out_.root_];
  }

 private:
  void BuildEdges() {
    const PartDag dag = PartDag::Make(graph_, out_.part_);
    successors_.assign(n_, 0);
    for (int u = 0; u < n_; ++u) successors_[u] = dag.successors(u);
    out_.closure_ = dag.closures();
  }

  // The widest antichain (Dilworth): n minus a maximum matching between
  // each operator and the operators it reaches.
  int MaxAntichain() const {
    std::vector<int> match(n_, -1);
    int matched = 0;
    for (int u = 0; u < n_; ++u) {
      uint64_t visited = 0;
      if (Augment(u, visited, match)) ++matched;
    }
    return n_ - matched;
  }

  bool Augment(int u, uint64_t& visited, std::vector<int>& match) const {
    for (uint64_t rest = out_.closure_[u] & ~OpBit(u); rest; rest &= rest - 1) {
      const int v = std::countr_zero(rest);
      if (visited & OpBit(v)) continue;
      visited |= OpBit(v);
      if (match[v] < 0 || Augment(match[v], visited, match)) {
        match[v] = u;
        return true;
      }
    }
    return false;
  }

  // Splits the transitive closure into chains, one longest chain at a time
  // (ties: the lowest index), each listed from its first to its last op.
  void BuildChains() {
    uint64_t remaining = LowMask(n_);
    while (remaining) {
      std::vector<int> depth(n_, 0), next(n_, -1);
      for (int u = n_ - 1; u >= 0; --u) {
        if (!(remaining & OpBit(u))) continue;
        depth[u] = 1;
        for (uint64_t rest = out_.closure_[u] & remaining & ~OpBit(u); rest; rest &= rest - 1) {
          const int v = std::countr_zero(rest);
          if (depth[v] + 1 > depth[u]) {
            depth[u] = depth[v] + 1;
            next[u] = v;
          }
        }
      }
      int start = -1;
      for (int u = 0; u < n_; ++u) {
        if ((remaining & OpBit(u)) && (start < 0 || depth[u] > depth[start])) start = u;
      }
      std::vector<int> chain;
      uint64_t mask = 0;
      for (int u = start; u >= 0; u = next[u]) {
        chain.push_back(u);
        mask |= OpBit(u);
      }
      remaining &= ~mask;
      chains_.push_back(std::move(chain));
      chain_masks_.push_back(mask);
    }
  }

  // Convolutions that could share a merge stage get the same class id: the
  // rule of CanMerge (common/stage.h), identical inputs and equal merge
  // signatures, is an equivalence, so every subset of a class merges unless
  // its output channels sum to more than limits::kMaxExtent (checked per
  // subset in AddMergeEndings).
  void BuildMergeClasses() {
    merge_class_.assign(n_, -1);
    out_channels_.assign(n_, 0);
    std::vector<int> representatives;  // the first member of each class
    for (int u = 0; u < n_; ++u) {
      const Node& node = graph_.node(out_.part_[u]);
      const std::optional<MergeSignature> signature = MergeSignatureOf(node.op);
      if (!signature) continue;
      out_channels_[u] = node.op.conv.out_channels;
      for (size_t c = 0; c < representatives.size() && merge_class_[u] < 0; ++c) {
        const Node& rep = graph_.node(out_.part_[representatives[c]]);
        if (rep.inputs == node.inputs && MergeSignatureOf(rep.op) == signature) {
          merge_class_[u] = static_cast<int>(c);
        }
      }
      if (merge_class_[u] < 0) {
        merge_class_[u] = static_cast<int>(representatives.size());
        representatives.push_back(u);
      }
    }
  }

  uint32_t StageId(Strategy strategy, uint64_t ending) {
    if (std::popcount(ending) == 1) strategy = Strategy::kParallel;  // one op: same stage
    const uint64_t key_high = strategy == Strategy::kMerge ? 1 : 0;
    auto& index = key_high ? merge_stage_index_ : parallel_stage_index_;
    const auto [id, inserted] = index.Emplace(ending, NarrowId(out_.stages_.size(), "stage"));
    if (inserted) {
      if (static_cast<int64_t>(out_.stages_.size()) >= options_.max_stages) {
        throw DpBudgetExceeded(DpBudget::kStages, options_.max_stages, 0, false, n_);
      }
      out_.stages_.push_back({ending, strategy});
    }
    return id;
  }

  struct Ending {
    uint32_t stage;
    uint64_t rest;
  };

  // Every ending goes through here, so the transition budget is checked
  // as endings are generated (a state can have very many).
  void AddEnding(std::vector<Ending>& endings, Ending ending) {
    endings.push_back(ending);
    if (++transitions_seen_ > options_.max_transitions) {
      throw DpBudgetExceeded(DpBudget::kTransitions, options_.max_transitions, 0, false, n_);
    }
    if (progress_ && (transitions_seen_ & 0xffff) == 0) MaybeReportProgress();
  }

  void MaybeReportProgress() {
    const auto now = std::chrono::steady_clock::now();
    if (now - last_report_ < std::chrono::seconds(1)) return;
    last_report_ = now;
    progress_({n_, static_cast<int64_t>(out_.states_.size()) - 1, transitions_seen_,
               static_cast<int64_t>(out_.stages_.size()),
               std::chrono::duration<double>(now - start_).count()});
  }

  void AddMergeEndings(uint64_t state, std::vector<Ending>& endings) {
    uint64_t sinks = 0;
    for (uint64_t rest = state; rest; rest &= rest - 1) {
      const int u = std::countr_zero(rest);
      if (!(successors_[u] & state)) sinks |= OpBit(u);
    }
    for (uint64_t rest = sinks; rest; rest &= rest - 1) {
      const uint64_t single = rest & (~rest + 1);
      AddEnding(endings, {StageId(Strategy::kMerge, single), state & ~single});
    }
    // Subsets of two or more sinks of one merge class.
    std::map<int, uint64_t> by_class;
    for (uint64_t rest = sinks; rest; rest &= rest - 1) {
      const int u = std::countr_zero(rest);
      if (merge_class_[u] >= 0) by_class[merge_class_[u]] |= OpBit(u);
    }
    for (const auto& [cls, members] : by_class) {
      if (std::popcount(members) < 2) continue;
      for (uint64_t subset = members; subset; subset = (subset - 1) & members) {
        if (std::popcount(subset) < 2) continue;
        int64_t out_channels = 0;
        for (uint64_t rest = subset; rest; rest &= rest - 1) {
          out_channels += out_channels_[std::countr_zero(rest)];
        }
        if (out_channels > limits::kMaxExtent) continue;  // CanMerge's set-level check
        AddEnding(endings, {StageId(Strategy::kMerge, subset), state & ~subset});
      }
    }
  }

  // At most one head per chain among the last r of the chain's ops still in
  // the state; a head brings its descendants in the state as its group;
  // groups are disjoint, at most r ops each, at most s of them.
  void AddParallelEndings(uint64_t state, std::vector<Ending>& endings) {
    const int chain_count = static_cast<int>(chains_.size());
    candidates_.resize(chain_count);
    for (int c = 0; c < chain_count; ++c) {
      const int end = std::popcount(chain_masks_[c] & state);  // in-state ops form a prefix
      const int begin = std::max(0, end - options_.max_group_size);
      candidates_[c].clear();
      for (int i = begin; i < end; ++i) {
        const uint64_t group = out_.closure_[chains_[c][i]] & state;
        if (std::popcount(group) <= options_.max_group_size) candidates_[c].push_back(group);
      }
    }
    ChooseHeads(0, 0, 0, state, endings);
  }

  void ChooseHeads(int chain, uint64_t used, int groups, uint64_t state,
                   std::vector<Ending>& endings) {
    if (chain == static_cast<int>(chains_.size())) {
      if (groups == 0) return;
      out_.width_ = std::max(out_.width_, groups);
      AddEnding(endings, {StageId(Strategy::kParallel, used), state & ~used});
      return;
    }
    ChooseHeads(chain + 1, used, groups, state, endings);
    if (groups == options_.max_groups) return;
    for (uint64_t group : candidates_[chain]) {
      if (group & used) continue;
      ChooseHeads(chain + 1, used | group, groups + 1, state, endings);
    }
  }

  uint32_t Visit(uint64_t state) {
    if (const uint32_t known = state_index_.Find(state); known != MaskIndex::kNone) return known;
    if (static_cast<int64_t>(out_.states_.size()) > options_.max_states) {
      throw DpBudgetExceeded(DpBudget::kStates, options_.max_states, 0, false, n_);
    }
    const uint32_t index = NarrowId(out_.states_.size(), "state");
    state_index_.Emplace(state, index);
    out_.states_.push_back({state, 0, 0});
    std::vector<Ending> endings;
    if (options_.strategies != StrategySet::kParallel) AddMergeEndings(state, endings);
    if (options_.strategies != StrategySet::kMerge) AddParallelEndings(state, endings);
    std::vector<Transition> transitions;
    transitions.reserve(endings.size());
    for (const Ending& e : endings) transitions.push_back({e.stage, Visit(e.rest)});
    State& st = out_.states_[index];
    st.first_transition = NarrowId(out_.transitions_.size(), "transition");
    out_.transitions_.insert(out_.transitions_.end(), transitions.begin(), transitions.end());
    st.transition_end = NarrowId(out_.transitions_.size(), "transition");
    out_.solve_order_.push_back(index);
    return index;
  }

  const Graph& graph_;
  const DpOptions& options_;
  PartSpace& out_;
  const int n_;
  const DpProgressFn& progress_;
  const std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  std::chrono::steady_clock::time_point last_report_;
  int64_t transitions_seen_ = 0;  // endings generated so far, also of states still being walked
  std::vector<uint64_t> successors_, chain_masks_;
  std::vector<std::vector<int>> chains_;
  std::vector<int> merge_class_;
  std::vector<int64_t> out_channels_;  // per local op, of convolutions with a merge class
  std::vector<std::vector<uint64_t>> candidates_;
  MaskIndex state_index_;
  MaskIndex parallel_stage_index_, merge_stage_index_;
};

namespace {

void CheckPart(const std::vector<NodeId>& part) {
  if (part.empty()) throw Error("cannot schedule an empty part");
  if (static_cast<int>(part.size()) > DpOptions::kMaxPartSize) {
    throw Error("part of " + std::to_string(part.size()) + " operators exceeds the DP limit of " +
                std::to_string(DpOptions::kMaxPartSize));
  }
}

}  // namespace

PartSpace PartSpace::Enumerate(const Graph& graph, const std::vector<NodeId>& part,
                               const DpOptions& options, const DpProgressFn& progress) {
  CheckPart(part);
  if (options.max_group_size < 1 || options.max_groups < 1) {
    throw Error("pruning parameters r and s must be >= 1");
  }
  for (const auto& [name, budget] :
       {std::pair{"states", options.max_states}, std::pair{"transitions", options.max_transitions},
        std::pair{"stages", options.max_stages}}) {
    if (budget < 1 || budget > DpOptions::kMaxBudget) {
      throw Error(std::string("DP budget of ") + name + " must be between 1 and " +
                  std::to_string(DpOptions::kMaxBudget) + ", not " + std::to_string(budget));
    }
  }
  PartSpace space;
  space.part_ = part;
  Builder builder(graph, options, space, progress);
  builder.CheckLowerBounds();
  builder.Run();
  return space;
}

PartSpace PartSpace::Greedy(const Graph& graph, const std::vector<NodeId>& part) {
  CheckPart(part);
  PartSpace space;
  space.part_ = part;
  const DpOptions options;  // only the stage index is used
  const DpProgressFn no_progress;
  Builder builder(graph, options, space, no_progress);
  builder.RunGreedy();
  return space;
}

Stage PartSpace::stage(int id) const {
  Stage out;
  FillStage(id, out);
  return out;
}

void PartSpace::FillStage(int id, Stage& out) const {
  const CompactStage& compact = stages_.at(id);
  out.strategy = compact.strategy;
  size_t groups = 0;
  auto next_group = [&]() -> std::vector<NodeId>& {
    if (out.groups.size() <= groups) out.groups.emplace_back();
    out.groups[groups].clear();
    return out.groups[groups++];
  };
  const uint64_t ending = compact.ops;
  if (compact.strategy == Strategy::kMerge) {
    for (uint64_t rest = ending; rest; rest &= rest - 1) {
      next_group().push_back(part_[std::countr_zero(rest)]);
    }
  } else {
    // Heads are the ops of the ending that no other op of it reaches; each
    // head's group is its descendants inside the ending.
    for (uint64_t rest = ending; rest; rest &= rest - 1) {
      const int u = std::countr_zero(rest);
      bool head = true;
      for (uint64_t others = ending & ~OpBit(u); others; others &= others - 1) {
        if (closure_[std::countr_zero(others)] & OpBit(u)) {
          head = false;
          break;
        }
      }
      if (!head) continue;
      std::vector<NodeId>& group = next_group();
      for (uint64_t g = closure_[u] & ending; g; g &= g - 1) {
        group.push_back(part_[std::countr_zero(g)]);
      }
    }
  }
  out.groups.resize(groups);
}

}  // namespace ios::coordinator
