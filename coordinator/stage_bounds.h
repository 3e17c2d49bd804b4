// Lower bounds of stage latencies from the measured single operators: what
// lets the lazy search (MeasureLazily, docs/search-cost.md) leave stages
// unmeasured and still find the schedule measuring every stage would find.
//
// For a concurrent stage, each group runs its operators one after another,
// and groups running at once never make one another faster. A group alone
// costs what its operators cost alone, minus the per-stage overhead (launch
// of the stage, synchronisation at its end) it pays once instead of once per
// operator; the smallest single-operator latency of the plan is at least
// that overhead. So
//   bound(group) = max(max_o t(o), sum_o t(o) - (|group| - 1) * min t)
//   bound(stage) = (1 - margin) * max over groups of bound(group)
// where `margin` (--bound-margin, default 0) allows for measurement noise. What the device class
// knows (devices::StageCostFacts) adds two more: with a serial cost per operator L (the simulator's
// kernel launch, paid on one host thread whatever runs concurrently), a stage of n operators costs
// at least n * L; with at most P operators making progress at once (the cpu backend's thread
// budget), a stage costs at least its operators' sum, less the overheads, over P. A merged
// convolution can beat every member alone (one large kernel fills the device where a small one does
// not), so its bound is L alone. Where the device class knows each operator's work W(o), the
// time it keeps the whole device busy, and no set of concurrent kernels progresses faster than
// one whole device (the simulator), a concurrent stage costs at least F + sum W(o), F the
// fixed cost of a stage (first launch, closing synchronisation). Single operators whose
// measurement failed are left out of the sums.
//
// The sums (the group's and P's) hold only where an operator inside a group
// costs at least what it costs alone less the overhead
// (StageCostFacts::chain_discount_sound: the simulator). Elsewhere (cpu,
// cuda) a group is bounded by its slowest operator alone and the P term
// goes: measured isolated, an operator alone reads a cold input, one inside
// a chain the input its group just wrote; measured as executed, chains still
// came out below the sums (54 of Inception V3's 127). The lazy search counts every measured
// stage below its bound and measures a part in full past a threshold
// (docs/search-cost.md).
#pragma once

#include <cstdint>
#include <vector>

#include "common/graph.h"
#include "devices/backend.h"

namespace ios::coordinator {

struct SearchPlan;
struct SearchOptions;

class StageBounds {
 public:
  //! Reads every distinct stage of `plan` once: its groups as lists of
  //! single-operator stage ids (the plan's sequential baselines hold one
  //! per operator).
  explicit StageBounds(const SearchPlan& plan);

  //! Operators of stage `id` (of a merged convolution: its members).
  int Operators(int id) const { return stages_.at(static_cast<size_t>(id)).operators; }

  //! Stage ids of the single operators, each once, in first-seen order.
  const std::vector<int>& singletons() const { return singletons_; }

  //! The smallest finite single-operator latency in `latency` (by stage id),
  //! or 0 when there is none: a bound of the per-stage overhead.
  double Overhead(const std::vector<double>& latency) const;

  //! What a bound assumes besides the single operators' latencies.
  struct Model {
    double overhead_ms = 0;   // per-stage overhead bound, from Overhead()
    double serial_op_ms = 0;  // serial cost per operator (L above)
    double margin = 0;        // noise, a fraction in [0, 1)
    int max_parallelism = 0;  // P above; 0: no limit known
    //! Whether the sums hold (devices::StageCostFacts::chain_discount_sound):
    //! without it, a group is bounded by its slowest operator alone, and
    //! the P term (a sum too) goes.
    bool chain_discount = false;
    //! Per single-operator stage id: the least time the operator keeps the
    //! whole device busy (devices::StageCostFacts::operator_work_ms); empty:
    //! not known. A concurrent stage then costs at least stage_fixed_ms
    //! plus its operators' work.
    std::vector<double> work_ms;
    double stage_fixed_ms = 0;
  };

  //! A lower bound of stage `id`'s latency from the singletons' latencies
  //! in `latency` (non-finite ones are left out) under `model`.
  double LowerBound(int id, const std::vector<double>& latency, const Model& model) const;

 private:
  struct StageShape {
    bool merge = false;
    int operators = 0;
    uint32_t first_group = 0, group_end = 0;  // into group_begin_
  };
  std::vector<int> singletons_;
  std::vector<StageShape> stages_;  // by stage id
  std::vector<uint32_t>
      group_begin_;               // per group: its first entry in members_; one past the end last
  std::vector<int32_t> members_;  // singleton stage id per operator of a group (-1: none)
};

//! The model a lazy search bounds with: the overhead from the single
//! operators' latencies in `latency`, what `facts` tells of the device
//! (each single operator's work asked once) and options.bound_margin.
StageBounds::Model MakeBoundModel(const Graph& graph, const SearchPlan& plan,
                                  const StageBounds& bounds, const std::vector<double>& latency,
                                  const devices::StageCostFacts& facts,
                                  const SearchOptions& options);

}  // namespace ios::coordinator
