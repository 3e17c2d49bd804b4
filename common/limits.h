// What a worker can measure: the limits on stages and shapes that the model
// loader (InferShapes) refuses beyond, the coordinator checks outgoing
// queries against and the wire protocol (schema/validate.h) enforces on
// every decoded query. One definition, so a model that loads never produces
// a query that workers drop. Real networks stay far below all of them.
#pragma once

#include <cstddef>

namespace ios::limits {

//! Channels, height and width of every tensor, and every window parameter
//! (kernel, stride, padding, dilation, dilated span, groups, out_channels).
inline constexpr int kMaxExtent = 1 << 16;
//! Concatenated terms read by one operator.
inline constexpr size_t kMaxTerms = 1024;
//! Summed slices in one term.
inline constexpr size_t kMaxSlices = 1024;
//! Steps of one sequential operator.
inline constexpr size_t kMaxChainLength = 64;
//! Sequential operators nested inside each other (the model format has none).
inline constexpr size_t kMaxChainDepth = 8;
//! Groups of one stage, operators of one group, tensors a stage reads from
//! outside: bounds on what the search may put in one query.
inline constexpr size_t kMaxGroups = 64;
inline constexpr size_t kMaxOpsPerGroup = 64;
inline constexpr size_t kMaxExternals = 1024;
//! Batch size of one measurement.
inline constexpr int kMaxBatchSize = 1 << 20;

}  // namespace ios::limits
