// Planning a search (PlanSearch): each block cut into parts, each part's
// candidate stages enumerated within the DP budgets (or the budget fallback:
// split, then greedy), and every stage keyed and interned once.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <deque>
#include <exception>
#include <optional>
#include <thread>
#include <unordered_map>

#include "common/error.h"
#include "common/printable.h"
#include "coordinator/part_cut.h"
#include "coordinator/part_walker.h"
#include "coordinator/search.h"

namespace ios::coordinator {

int SearchPlan::Intern(StageKeyer& keyer, const Stage& stage, int part, int local) {
  return InternHashed(HashStageKey(keyer.Key(stage)), &stage, part, local);
}

int SearchPlan::InternHash(const StageKeyHash& hash, int part, int local) {
  if (part < 0) throw Error("SearchPlan::InternHash: a stage of no part needs Intern");
  return InternHashed(hash, nullptr, part, local);
}

int SearchPlan::InternHashed(const StageKeyHash& hash, const Stage* stage, int part, int local) {
  const int id = index_.FindOrAdd(hash, static_cast<int>(key_hashes.size()));
  if (id < static_cast<int>(key_hashes.size())) return id;
  key_hashes.push_back(hash);
  if (part < 0) {
    refs_.push_back({-1, static_cast<int>(loose_stages_.size())});
    loose_stages_.push_back(*stage);
  } else {
    refs_.push_back({part, local});
  }
  return id;
}

Stage SearchPlan::StageOf(int id) const {
  const StageRef& ref = refs_.at(id);
  return ref.part < 0 ? loose_stages_.at(ref.local) : parts.at(ref.part).space.stage(ref.local);
}

const char* ToString(PartSchedule schedule) {
  switch (schedule) {
    case PartSchedule::kExact:
      return "exact";
    case PartSchedule::kCut:
      return "cut";
    case PartSchedule::kSplit:
      return "split";
    case PartSchedule::kMemoryOrder:
      return "memory order";
    case PartSchedule::kGreedy:
      return "greedy";
  }
  return "?";
}

std::vector<std::vector<NodeId>> PartsOf(const Graph& graph, const Block& block, int max_part_size,
                                         std::vector<bool>* cut) {
  const std::vector<std::vector<NodeId>> given =
      block.parts.empty() ? std::vector<std::vector<NodeId>>{block.Operators()} : block.parts;
  std::vector<std::vector<NodeId>> parts;
  if (cut) cut->clear();
  for (const std::vector<NodeId>& ops : given) {
    auto pieces = SplitToSize(graph, ops, static_cast<size_t>(max_part_size));
    const bool was_cut = pieces.size() > 1;
    for (auto& piece : pieces) {
      parts.push_back(std::move(piece));
      if (cut) cut->push_back(was_cut);
    }
  }
  return parts;
}

namespace {

struct Piece {
  std::vector<NodeId> ops;
  PartSchedule schedule;
  PartSpace space;
};

// The first budget a part went over: its message, which budget, its limit.
struct BudgetHit {
  std::string text;
  DpBudget budget = DpBudget::kStates;
  int64_t limit = 0;
};

// The budget fallback: the whole part if the DP fits its budgets, else the
// two halves of a narrow cut, recursively, and greedy at the depth limit.
// `reason` gets the first budget hit.
void PlanPiece(const Graph& graph, const std::vector<NodeId>& ops, const SearchOptions& options,
               int depth, const DpProgressFn& progress, std::vector<Piece>& out,
               BudgetHit& reason) {
  try {
    PartSpace space = PartSpace::Enumerate(graph, ops, options.dp, progress);
    out.push_back(
        {ops, depth == 0 ? PartSchedule::kExact : PartSchedule::kSplit, std::move(space)});
    return;
  } catch (const DpBudgetExceeded& e) {
    if (reason.text.empty()) reason = {e.what(), e.budget(), e.limit()};
  }
  if (depth >= options.max_split_depth || ops.size() < 2) {
    out.push_back({ops, PartSchedule::kGreedy, PartSpace::Greedy(graph, ops)});
    return;
  }
  const size_t n = ops.size(), quarter = (n + 3) / 4;
  const PartCut cut = NarrowCut(graph, ops, quarter, n - quarter, n / 2);
  PlanPiece(graph, cut.first, options, depth + 1, progress, out, reason);
  PlanPiece(graph, cut.second, options, depth + 1, progress, out, reason);
}

// Restricts a part's pieces to the transitions under the memory cap; where
// a piece has no schedule left (a cut restricts the order), the part is
// given its least-peak order instead, which fits by the cap's choice.
void RestrictPieces(const Graph& graph, const MemoryCaps& caps, const std::vector<NodeId>& ops,
                    std::vector<char> ran, const MemoryCaps::PartLeast& least, MemoryPlanInfo& info,
                    std::vector<Piece>& pieces) {
  bool stuck = false;
  for (Piece& piece : pieces) {
    piece.space = caps.Restrict(piece.space, piece.ops, ran, info.cap);
    const std::vector<double> free(static_cast<size_t>(piece.space.stage_count()), 0.0);
    if (!std::isfinite(piece.space.Solve(free).latency_ms)) stuck = true;
    for (NodeId id : piece.ops) ran[static_cast<size_t>(id)] = 1;
  }
  if (!stuck) return;
  pieces.clear();
  pieces.push_back({ops, PartSchedule::kMemoryOrder, PartSpace::Sequence(graph, ops, least.order)});
  ++info.memory_order_parts;
  info.warnings.push_back("memory: the part of " + std::to_string(ops.size()) + " operators from " +
                          Quoted(graph.node(ops.front()).name) +
                          " has no schedule of its pieces under the cap: its least-peak order");
  spdlog::warn("{}", info.warnings.back());
}

// Which option set the limit `hit` went over, with its value: each budget
// named with its own number.
std::string NameBudget(const BudgetHit& hit, const SearchOptions& options) {
  switch (hit.budget) {
    case DpBudget::kStates:
      return "--max-dp-states " + std::to_string(options.dp.max_states);
    case DpBudget::kTransitions:
      return "--max-dp-transitions " + std::to_string(options.dp.max_transitions);
    case DpBudget::kStages:
      if (hit.limit < options.dp.max_stages) {
        return std::to_string(hit.limit) + " stages is what was left of the search's budget of " +
               std::to_string(options.max_search_stages) + " distinct stages (--max-search-stages)";
      }
      return "--max-dp-stages " + std::to_string(options.dp.max_stages);
  }
  return "?";
}

std::string DescribeFallback(const Graph& graph, int block, int part,
                             const std::vector<NodeId>& ops, const std::vector<Piece>& pieces,
                             const std::string& reason) {
  int split = 0, greedy = 0, greedy_ops = 0;
  for (const Piece& piece : pieces) {
    if (piece.schedule == PartSchedule::kGreedy) {
      ++greedy;
      greedy_ops += static_cast<int>(piece.ops.size());
    } else {
      ++split;
    }
  }
  std::string text = "block " + std::to_string(block) + " part " + std::to_string(part) + " (" +
                     std::to_string(ops.size()) + " operators, '" + graph.node(ops.front()).name +
                     "' .. '" + graph.node(ops.back()).name + "'): " + reason +
                     "; its schedule is approximate: ";
  if (pieces.size() == 1) return text + "greedy";
  text += "cut into " + std::to_string(pieces.size()) + " pieces run one after another, " +
          std::to_string(split) + " solved exactly (split)";
  if (greedy > 0) {
    text +=
        ", " + std::to_string(greedy) + " greedy (" + std::to_string(greedy_ops) + " operators)";
  }
  return text + "; or greedy over the whole part if that is faster";
}

// One line for a block whose parts were cut by --max-part-size.
std::string DescribeSizeCut(const Graph& graph, int block_index, const Block& block,
                            const std::vector<std::vector<NodeId>>& parts,
                            const std::vector<bool>& cut_by_size, int max_part_size) {
  const std::vector<NodeId> ops = block.Operators();
  int cut_parts = 0;
  for (bool cut : cut_by_size) cut_parts += cut ? 1 : 0;
  std::string text = "block " + std::to_string(block_index) + " (" + std::to_string(ops.size()) +
                     " operators, " + Quoted(graph.node(ops.front()).name) + " .. " +
                     Quoted(graph.node(ops.back()).name) + "): ";
  text += block.parts.empty() ? "more than" : "an explicit part of more than";
  text += " --max-part-size " + std::to_string(max_part_size) + " operators, cut into " +
          std::to_string(parts.size()) + " parts run one after another (" +
          std::to_string(cut_parts) +
          " of them from the cut, dp = cut); its schedule is approximate: the stages across a "
          "cut are lost; or greedy over the whole block if that is faster";
  return text;
}

// Hashes the canonical keys of a part's candidate stages (in stage order)
// on up to `threads` threads, each with its own keyer over a contiguous
// range of stages; the result does not depend on the count. The texts are
// built in each keyer's buffer and never copied.
class KeyPool {
 public:
  KeyPool(const Graph& graph, int threads) {
    for (int t = 0; t < threads; ++t) {
      keyers_.emplace_back(graph);
      slices_.emplace_back();
    }
  }

  void Build(const PartSpace& space, std::vector<StageKeyHash>& out) {
    const int count = space.stage_count();
    // Below this many stages a thread costs more than it saves.
    constexpr int kMinStagesPerThread = 2048;
    const int threads =
        std::clamp(count / kMinStagesPerThread, 1, static_cast<int>(keyers_.size()));
    std::vector<std::exception_ptr> errors(threads);
    {
      std::vector<std::jthread> workers;
      for (int t = 1; t < threads; ++t) {
        workers.emplace_back([&, t] { Run(space, t, threads, count, errors[t]); });
      }
      Run(space, 0, threads, count, errors[0]);
    }  // joined here
    for (const std::exception_ptr& error : errors) {
      if (error) std::rethrow_exception(error);
    }
    out.clear();
    out.reserve(count);
    for (int t = 0; t < threads; ++t) out.insert(out.end(), slices_[t].begin(), slices_[t].end());
  }

 private:
  // Hashes of stages [count * t / threads, count * (t + 1) / threads) into
  // slices_[t]; an exception is kept for the caller.
  void Run(const PartSpace& space, int t, int threads, int count,
           std::exception_ptr& error) noexcept {
    try {
      const int begin = static_cast<int>(int64_t{count} * t / threads);
      const int end = static_cast<int>(int64_t{count} * (t + 1) / threads);
      std::vector<StageKeyHash>& slice = slices_[t];
      slice.clear();
      // Two keys hashed at once (HashStageKeyPair): the first is held
      // while the keyer builds the second in its buffer.
      Stage stage;
      std::string held;
      int local = begin;
      for (; local + 1 < end; local += 2) {
        space.FillStage(local, stage);
        held = keyers_[t].Key(stage);
        space.FillStage(local + 1, stage);
        StageKeyHash first, second;
        HashStageKeyPair(held, keyers_[t].Key(stage), first, second);
        slice.push_back(first);
        slice.push_back(second);
      }
      if (local < end) {
        space.FillStage(local, stage);
        slice.push_back(HashStageKey(keyers_[t].Key(stage)));
      }
    } catch (...) {
      error = std::current_exception();
    }
  }

  std::deque<StageKeyer> keyers_;
  std::vector<std::vector<StageKeyHash>> slices_;
};

}  // namespace

SearchPlan PlanSearch(const Graph& graph, const SearchOptions& options,
                      const std::function<void(const PlanProgress&)>& progress) {
  if (options.max_part_size < 1 || options.max_part_size > DpOptions::kMaxPartSize) {
    throw Error("max part size must be between 1 and " + std::to_string(DpOptions::kMaxPartSize));
  }
  if (options.max_split_depth < 0) throw Error("max split depth must be >= 0");
  if (options.max_search_stages < 1 || options.max_search_stages > DpOptions::kMaxBudget) {
    throw Error("the search's stage budget must be between 1 and " +
                std::to_string(DpOptions::kMaxBudget));
  }
  if (options.batch_size < 1) throw Error("batch size must be >= 1");
  if (options.plan_threads < 0 || options.plan_threads > SearchOptions::kMaxPlanThreads) {
    throw Error("plan threads must be between 0 (one per hardware thread) and " +
                std::to_string(SearchOptions::kMaxPlanThreads));
  }
  SearchPlan plan;
  StageKeyer keyer(graph);
  int threads = options.plan_threads;
  if (threads == 0) {
    threads = std::clamp(static_cast<int>(std::thread::hardware_concurrency()), 1,
                         SearchOptions::kMaxPlanThreads);
  }
  KeyPool key_pool(graph, threads);
  std::vector<StageKeyHash> hashes;
  // Every part of every block, in order (a part's index in `parts`), and
  // which of them to walk: with reuse, only the first of each structure
  // (StageKeyer::OrderedKey); a later part of the same structure reuses its
  // plan (NASNet repeats its cells).
  std::vector<std::vector<NodeId>> parts;
  std::vector<std::vector<bool>> cut_by_size(graph.blocks.size());
  std::vector<size_t> first_part_of_block;
  std::vector<std::string> structures;
  std::vector<bool> walk;
  std::unordered_map<std::string, size_t> first_of_structure;
  for (size_t b = 0; b < graph.blocks.size(); ++b) {
    first_part_of_block.push_back(parts.size());
    for (std::vector<NodeId>& ops :
         PartsOf(graph, graph.blocks[b], options.max_part_size, &cut_by_size[b])) {
      // A part's transitions under a memory cap depend on what runs around
      // it, not only on its structure: no reuse then.
      std::string structure;
      if (options.reuse_repeated_parts && !options.memory.active()) {
        structure = keyer.OrderedKey(ops);
      }
      walk.push_back(structure.empty() ||
                     first_of_structure.emplace(structure, parts.size()).second);
      structures.push_back(std::move(structure));
      parts.push_back(std::move(ops));
    }
  }
  first_part_of_block.push_back(parts.size());
  const MemoryBudget memory =
      PlanMemoryBudget(graph, parts, options.batch_size, options.memory, plan.memory);
  // With threads to spare, parts are walked ahead on a thread of their own
  // while this one keys the stages of the parts before.
  std::optional<PartWalker> walker;
  if (threads > 1) walker.emplace(graph, parts, walk, options.dp);
  // Parts planned as one exact piece, by structure: where a part of the
  // same structure comes again, its plan is reused.
  std::unordered_map<std::string, int> planned_parts;
  for (size_t b = 0; b < graph.blocks.size(); ++b) {
    const Block& block = graph.blocks[b];
    for (size_t i = first_part_of_block[b]; i < first_part_of_block[b + 1]; ++i) {
      const size_t p = i - first_part_of_block[b];
      const std::vector<NodeId>& ops = parts[i];
      const bool part_cut_by_size = cut_by_size[b][p];
      DpProgressFn dp_progress;
      if (progress) {
        dp_progress = [&progress, b, p](const DpProgress& dp) {
          progress({static_cast<int>(b), static_cast<int>(p), dp});
        };
      }
      // What is left of the search's stage budget caps this part's.
      SearchOptions part_options = options;
      const int64_t left = options.max_search_stages - static_cast<int64_t>(plan.stage_count());
      const int64_t part_budget = std::clamp<int64_t>(left, 1, options.dp.max_stages);
      // A part with the structure of one planned before has the same
      // candidate stages, with the same keys, in the same order: that part's
      // space and stage ids are reused, nothing is walked or keyed again.
      // The budgets see what walking it would give.
      const std::string& structure = structures[i];
      if (!structure.empty()) {
        const auto seen = planned_parts.find(structure);
        if (seen != planned_parts.end() &&
            plan.parts[seen->second].space.stage_count() <= std::min(left, options.dp.max_stages)) {
          PartPlan part;
          part.block = static_cast<int>(b);
          part.part = static_cast<int>(p);
          part.schedule = part_cut_by_size ? PartSchedule::kCut : PartSchedule::kExact;
          part.ops = ops;
          part.space = plan.parts[seen->second].space.Rebound(ops);
          part.stage_ids = plan.parts[seen->second].stage_ids;
          plan.stage_occurrences += part.space.stage_count();
          ++plan.reused_parts;
          plan.parts.push_back(std::move(part));
          continue;
        }
      }
      part_options.dp.max_stages = part_budget;
      std::vector<Piece> pieces;
      BudgetHit hit;
      // The walk done ahead is this part's plan when it stayed within what is
      // left of the budgets; else the part is walked here, as it would be
      // without the walker, so budget hits and fallbacks are the same.
      std::optional<PartSpace> walked;
      if (walker && walk[i]) walked = walker->Take(i, dp_progress);
      if (walked && walked->stage_count() <= part_budget) {
        pieces.push_back({ops, PartSchedule::kExact, std::move(*walked)});
      } else {
        PlanPiece(graph, ops, part_options, 0, dp_progress, pieces, hit);
      }
      std::string reason = hit.text;
      if (!reason.empty()) reason += " (" + NameBudget(hit, options) + ")";
      if (!reason.empty()) {
        plan.warnings.push_back(
            DescribeFallback(graph, static_cast<int>(b), static_cast<int>(p), ops, pieces, reason));
        spdlog::warn("{}", plan.warnings.back());
      }
      // A part of a block cut by size is solved exactly but the block is
      // not: the stages across the cut are lost (SolveSchedule then lets the
      // block's greedy baseline compete).
      for (Piece& piece : pieces) {
        if (part_cut_by_size && piece.schedule == PartSchedule::kExact) {
          piece.schedule = PartSchedule::kCut;
        }
      }
      if (memory.caps) {
        RestrictPieces(graph, *memory.caps, ops, memory.ran_before[i], memory.least[i], plan.memory,
                       pieces);
      }
      const bool cut = pieces.size() > 1;
      if (!structure.empty() && !cut && pieces[0].schedule != PartSchedule::kGreedy) {
        planned_parts.emplace(structure, static_cast<int>(plan.parts.size()));
      }
      if (cut) {
        PartSpace greedy = PartSpace::Greedy(graph, ops);
        if (memory.caps) {
          greedy = memory.caps->Restrict(greedy, ops, memory.ran_before[i], plan.memory.cap);
        }
        pieces.push_back({ops, PartSchedule::kGreedy, std::move(greedy)});
      }
      for (size_t k = 0; k < pieces.size(); ++k) {
        PartPlan part;
        part.block = static_cast<int>(b);
        part.part = static_cast<int>(p);
        part.piece = static_cast<int>(k);
        part.schedule = pieces[k].schedule;
        part.ops = std::move(pieces[k].ops);
        part.alternative = cut && k + 1 == pieces.size();
        part.space = std::move(pieces[k].space);
        const int part_index = static_cast<int>(plan.parts.size());
        part.stage_ids.reserve(part.space.stage_count());
        key_pool.Build(part.space, hashes);
        for (int local = 0; local < part.space.stage_count(); ++local) {
          part.stage_ids.push_back(plan.InternHash(hashes[local], part_index, local));
        }
        plan.stage_occurrences += part.space.stage_count();
        plan.parts.push_back(std::move(part));
      }
    }
    const std::vector<bool>& block_cut = cut_by_size[b];
    if (std::find(block_cut.begin(), block_cut.end(), true) != block_cut.end()) {
      const std::vector<std::vector<NodeId>> block_parts(
          parts.begin() + static_cast<std::ptrdiff_t>(first_part_of_block[b]),
          parts.begin() + static_cast<std::ptrdiff_t>(first_part_of_block[b + 1]));
      plan.warnings.push_back(DescribeSizeCut(graph, static_cast<int>(b), block, block_parts,
                                              block_cut, options.max_part_size));
      spdlog::warn("{}", plan.warnings.back());
    }
    BlockSchedule sequential, greedy;
    for (const Stage& s : SequentialSchedule(block.Operators())) {
      sequential.emplace_back(s, plan.Intern(keyer, s));
    }
    for (const Stage& s : GreedySchedule(graph, block.Operators())) {
      greedy.emplace_back(s, plan.Intern(keyer, s));
    }
    plan.sequential.push_back(std::move(sequential));
    plan.greedy.push_back(std::move(greedy));
  }
  plan.warnings.insert(plan.warnings.end(), plan.memory.warnings.begin(),
                       plan.memory.warnings.end());
  return plan;
}

}  // namespace ios::coordinator
