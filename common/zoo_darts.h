// Internal to the model zoo (common/zoo*.cc), like zoo_builder.h: DARTS
// (Liu et al. 2019), the ImageNet network of the DARTS_V2 genotype, one of
// the Serenity paper's benchmark kinds.
#pragma once

#include <vector>

#include "common/zoo_builder.h"

namespace ios::zoo {

enum class DartsOp { kSepConv3x3, kDilConv3x3, kMaxPool3x3, kSkip };

//! One operation of a cell step: `op` applied to state `input` (0 and 1 are
//! the cell's two preprocessed inputs, 2.. the steps' outputs).
struct DartsEdge {
  DartsOp op;
  int input;
};

//! Two edges per step, summed into the step's state; `*_concat` lists the
//! states concatenated into the cell's output.
struct DartsGenotype {
  std::vector<DartsEdge> normal;
  std::vector<int> normal_concat;
  std::vector<DartsEdge> reduce;
  std::vector<int> reduce_concat;
};

//! DARTS_V2, the genotype of the paper's second-order search.
const DartsGenotype& DartsV2();

struct DartsOptions {
  int channels = 48;  // C of the first cells; ImageNet's mobile setting
  int layers = 14;    // cells; reductions at layers/3 and 2*layers/3
  //! Only the stems, cell 0, and cell 1's two preprocessing convolutions
  //! (so cell 0's concatenated output has convolution readers), ending in
  //! an identity that concatenates those two: the paper's "first cell".
  bool first_cell_only = false;
};

//! DARTS for 3x224x224 inputs, operators in the order PyTorch's forward
//! runs them: stem0 (conv 3x3/2 to C/2, relu, conv 3x3/2 to C), stem1 (relu,
//! conv 3x3/2), `layers` cells, a global average pool (no classifier: the
//! zoo has no fully connected layer). Batch norm is folded away. Blocks:
//! stem0; stem1 and the cells as one block with a part per cell (cell k
//! reads cells k-1 and k-2, so only the stems and the last cell are cuts);
//! the pool. Throws ios::Error for channels that are not a positive even
//! number or layers < 3 (or < 2 with first_cell_only).
Graph BuildDartsImageNet(const DartsOptions& options, const DartsGenotype& genotype = DartsV2());

}  // namespace ios::zoo
