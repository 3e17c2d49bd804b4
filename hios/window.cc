#include "hios/window.h"

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <limits>
#include <string>
#include <utility>

#include "common/error.h"

namespace ios::hios {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// A merge must gain more than the rounding of sums taken along another
// path: an equally long critical path can come out an ulp shorter.
constexpr double kRelativeGain = 1e-12;

// Transitive closure as one bitset row per op, built once: the window asks
// "independent?" for every pair it grows over, and a pair may be linked only
// through ops on other devices, so direct edges are not enough.
class Reach {
 public:
  explicit Reach(const Dag& dag)
      : words_((static_cast<size_t>(dag.ops()) + 63) / 64),
        bits_(words_ * static_cast<size_t>(dag.ops()), 0) {
    const auto& topo = dag.topological();
    for (auto it = topo.rbegin(); it != topo.rend(); ++it) {
      uint64_t* row = Row(*it);
      for (EdgeId e : dag.out_edges(*it)) {
        const OpId s = dag.edge(e).dst;
        const uint64_t* below = Row(s);
        for (size_t w = 0; w < words_; ++w) row[w] |= below[w];
        row[static_cast<size_t>(s) / 64] |= uint64_t{1} << (static_cast<size_t>(s) % 64);
      }
    }
  }

  bool Independent(OpId a, OpId b) const { return !Reaches(a, b) && !Reaches(b, a); }

  //! Every op of `add` independent of every op of `group`.
  bool Independent(const std::vector<OpId>& add, const std::vector<OpId>& group) const {
    for (OpId a : add) {
      for (OpId b : group) {
        if (!Independent(a, b)) return false;
      }
    }
    return true;
  }

 private:
  bool Reaches(OpId a, OpId b) const {
    const auto bit = static_cast<size_t>(b);
    return (Row(a)[bit / 64] >> (bit % 64)) & 1;
  }
  uint64_t* Row(OpId op) { return bits_.data() + words_ * static_cast<size_t>(op); }
  const uint64_t* Row(OpId op) const { return bits_.data() + words_ * static_cast<size_t>(op); }

  size_t words_;
  std::vector<uint64_t> bits_;
};

// Where each mapped op's stage is now; -1 when unmapped.
void Locate(const MultiSchedule& q, int device, std::vector<StageRef>& where) {
  const auto& list = q.stages[static_cast<size_t>(device)];
  for (int k = 0; k < static_cast<int>(list.size()); ++k) {
    for (OpId op : list[static_cast<size_t>(k)]) where[static_cast<size_t>(op)] = {device, k};
  }
}

// Latency of q with stages at.index..at.index+p of at.device replaced by
// `merged`; +inf when that deadlocks. Edits q in place and restores it, so a
// candidate costs one evaluation, not a copy of the schedule.
double LatencyMerged(const Dag& dag, const Costs& costs, MultiSchedule& q, StageRef at, int p,
                     const std::vector<OpId>& merged) {
  auto& list = q.stages[static_cast<size_t>(at.device)];
  const auto first = list.begin() + at.index;
  std::vector<std::vector<OpId>> saved(std::make_move_iterator(first),
                                       std::make_move_iterator(first + p + 1));
  list.erase(first + 1, first + p + 1);
  list[static_cast<size_t>(at.index)] = merged;
  const Timeline t = Evaluate(dag, costs, q);
  const auto again = list.begin() + at.index;
  *again = std::move(saved[0]);
  list.insert(again + 1, std::make_move_iterator(saved.begin() + 1),
              std::make_move_iterator(saved.end()));
  return t.acyclic ? t.latency_ms : kInf;
}

}  // namespace

void ValidateWindowOptions(const WindowOptions& options) {
  if (options.window < 1) {
    throw Error("hios window: option window is " + std::to_string(options.window) +
                ", expected at least 1 (stages one window spans)");
  }
  if (options.streams < 1) {
    throw Error("hios window: option streams is " + std::to_string(options.streams) +
                ", expected at least 1 (ops in one concurrent stage)");
  }
}

MultiSchedule Parallelize(const Dag& dag, const Costs& costs, const MultiSchedule& q,
                          const WindowOptions& options) {
  ValidateWindowOptions(options);
  MultiSchedule result = q;
  const Timeline before = Evaluate(dag, costs, result);
  if (!before.acyclic) {
    throw Error("hios window: the schedule to parallelize cannot run: " + before.problem);
  }
  if (options.window == 1 || options.streams == 1) return result;

  const Reach reach(dag);
  std::vector<StageRef> where(static_cast<size_t>(dag.ops()), StageRef{-1, -1});
  for (int d = 0; d < static_cast<int>(result.stages.size()); ++d) Locate(result, d, where);
  const auto streams = static_cast<size_t>(options.streams);
  double current = before.latency_ms;
  std::vector<OpId> merged, best_stage;
  for (OpId v : PriorityOrder(dag, costs)) {
    const StageRef at = where[static_cast<size_t>(v)];
    if (at.device < 0) continue;
    auto& list = result.stages[static_cast<size_t>(at.device)];
    merged = list[static_cast<size_t>(at.index)];
    int best_p = 0;
    double best = kInf;
    for (int p = 1; p < options.window; ++p) {
      const auto next = static_cast<size_t>(at.index + p);
      if (next >= list.size()) break;
      const std::vector<OpId>& add = list[next];
      if (merged.size() + add.size() > streams || !reach.Independent(add, merged)) break;
      merged.insert(merged.end(), add.begin(), add.end());
      // An unpriced stage (a farm miss) is no candidate; NaN fails `<` too.
      if (!(costs.StageMs(merged, at.device) < kInf)) continue;
      const double latency = LatencyMerged(dag, costs, result, at, p, merged);
      if (latency < best) {
        best = latency;
        best_p = p;
        best_stage = merged;
      }
    }
    if (best_p == 0 || !(best < current * (1 - kRelativeGain))) continue;
    const auto first = list.begin() + at.index;
    list.erase(first + 1, first + best_p + 1);
    list[static_cast<size_t>(at.index)] = best_stage;
    current = best;
    Locate(result, at.device, where);
  }
  return result;
}

std::vector<std::vector<OpId>> WindowCandidates(const Dag& dag, const MultiSchedule& q,
                                                const WindowOptions& options) {
  ValidateWindowOptions(options);
  const bool merges = options.window > 1 && options.streams > 1;
  const Reach reach(dag);
  std::vector<std::vector<OpId>> out;
  std::vector<OpId> sequence;
  for (const auto& list : q.stages) {
    sequence.clear();
    for (const auto& stage : list) {
      // Evaluate prices q's own stages too, whatever the options.
      if (stage.size() > 1) out.push_back(stage);
      sequence.insert(sequence.end(), stage.begin(), stage.end());
    }
    if (!merges) continue;
    const auto streams = static_cast<size_t>(options.streams);
    for (size_t i = 0; i < sequence.size(); ++i) {
      for (size_t j = i + 1; j < sequence.size() && j - i < streams; ++j) {
        bool independent = true;
        for (size_t k = i; k < j && independent; ++k) {
          independent = reach.Independent(sequence[j], sequence[k]);
        }
        if (!independent) break;
        out.emplace_back(sequence.begin() + static_cast<std::ptrdiff_t>(i),
                         sequence.begin() + static_cast<std::ptrdiff_t>(j) + 1);
      }
    }
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

}  // namespace ios::hios
