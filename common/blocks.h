// Blocks for graphs that come without them (ONNX imports): the network cut at
// every operator that all paths from the input to the output pass through.
#pragma once

#include <vector>

#include "common/graph.h"

namespace ios {

//! The single-entry single-exit blocks of `graph`, finest first: a block ends
//! at each operator every input-to-output path passes through (a dominator
//! that is also a post-dominator of everything before it), so no edge
//! crosses a block boundary except through its exit. Requires the nodes in
//! topological order (node 0 the input) and one sink, the last node; throws
//! ios::Error naming the first extra sink otherwise. Parts are left empty
//! (the search splits blocks too large for its budgets).
std::vector<Block> FindBlocks(const Graph& graph);

//! Joins runs of consecutive blocks into one while the joined block has at
//! most `max_operators` operators. Any run of consecutive single-entry
//! single-exit blocks is one too; a joined block lets the DP put operators
//! on both sides of a former cut into one stage (fewer stages, fewer
//! synchronizations), and its DP grows by a sum, not a product, since every
//! state of the later block contains the whole earlier one.
std::vector<Block> CoalesceBlocks(const std::vector<Block>& blocks, int max_operators);

//! The joined size automatic blocks get: on the zoo models (sim:v100) joining
//! up to 24 operators finds schedules as fast as their hand-made blocks or
//! faster, and larger joins gain nothing more (docs/onnx.md).
inline constexpr int kAutoBlockOperators = 24;

//! Parts for a block with no cut vertex inside (NASNet's cells each read
//! the two cells before them): its operators in node order cut into runs
//! of at most `max_operators`, the cuts chosen to leave as few tensors
//! crossing them as possible (a dynamic program over cut positions; each
//! cut also costs one, so fewer parts win ties). Runs of a topological order
//! are an acyclic partition: every edge between parts goes forward.
std::vector<std::vector<NodeId>> NarrowParts(const Graph& graph, const Block& block,
                                             int max_operators);

//! The part size automatic parts get, and the block size from which a block
//! gets them (smaller blocks are one part, or cut by the search's own
//! budgets): on NASNet (sim:v100) parts of about the size of its cells
//! find as fast a schedule as the zoo's hand-made parts (docs/onnx.md).
inline constexpr int kAutoPartOperators = 16;
inline constexpr int kAutoPartsFrom = 50;

//! Replaces `graph`'s blocks (and their parts) with automatic ones:
//! FindBlocks joined by CoalesceBlocks up to `max_operators`; blocks of more
//! than kAutoPartsFrom operators get NarrowParts of kAutoPartOperators.
void SetAutomaticBlocks(Graph& graph, int max_operators = kAutoBlockOperators);

}  // namespace ios
