// Internal to exec/: turns operators with IOS inputs (terms of summed
// channel slices) into steps over views, the one resolution of inputs that
// StageProgram and BuildNetworkProgram share.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "exec/program.h"

namespace ios::exec::detail {

//! The shape a view reads: its channels at its buffer's height and width.
Shape ViewShape(const Program& program, const View& view);

//! Channels [begin, end) of what `source` holds (a view of a whole tensor).
View SubView(const View& source, int begin, int end);

//! Weights of the operator carrying them (a convolution, or a registered
//! kind declaring weights: CarriesWeights) at `chain_index` of the op being
//! emitted (0 for a plain op), `op` reading `input`.
using WeightsFor =
    std::function<ConvWeights(int chain_index, const OpParams& op, const Shape& input)>;

class ProgramBuilder {
 public:
  explicit ProgramBuilder(Program& program) : program_(program) {}

  //! A new buffer; every buffer gets its own slot until a plan assigns them.
  int AddBuffer(Shape shape, const std::string& label);
  //! Adds a stage and returns its index.
  int AddStage(int lanes);
  //! Appends a step to a lane of the last stage.
  void AddStep(int lane, Step step);

  //! Emits the steps computing `op` (never kInput) on lane `lane` of the
  //! last stage: `terms` are the op's IOS inputs as views (the views of a
  //! term are summed; terms are concatenated, or combined element-wise for
  //! kEltwise); the result goes to `output`. Gathers that need storage get
  //! temp buffers, recorded in temps().
  void EmitOp(int lane, const OpParams& op, const std::vector<std::vector<View>>& terms,
              const View& output, const WeightsFor& weights, const std::string& label);

  //! One view holding the terms concatenated (each term summed): without a
  //! copy when every term is one view and they are consecutive channels of
  //! one buffer (a single view, or a concatenation served as a view), else a
  //! temp gathered by identity steps.
  View Gather(int lane, const std::vector<std::vector<View>>& terms, const std::string& label);

  //! Buffers created as temps since the last call (cleared by it).
  std::vector<int> TakeTemps();

 private:
  int AddTemp(Shape shape, const std::string& label);
  int AddWeights(ConvWeights weights);

  Program& program_;
  std::vector<int> temps_;
};

}  // namespace ios::exec::detail
