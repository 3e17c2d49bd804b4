// Where the report's boxes and nodes go, computed in C++ so the page's
// script only scales coordinates to pixels (and so layout is unit-tested).
// Both layouts are deterministic: the same input gives the same output.
#pragma once

#include <vector>

#include "common/graph.h"
#include "report/report.h"

namespace ios::report {

//! A stage's box: spans rows [first_row, first_row + rows).
struct StageBox {
  int stage = 0;   // index into the schedule's (or device's) stages
  int device = 0;  // multi-device: index into MultiDeviceView::devices; else 0
  int first_row = 0, rows = 1;
  double start_ms = 0, width_ms = 0;
  //! The stage had no price: width_ms comes from its operators alone (or is 0).
  bool estimated = false;
  bool merged = false;
};

//! An operator's box (a merge stage's one box holds all its operators).
struct OpBox {
  std::vector<NodeId> nodes;
  int stage = 0, device = 0;
  int row = 0;  // the timeline row (lane l of a one-device schedule is row l)
  double start_ms = 0, width_ms = 0;
};

//! A transfer's box on the multi-device link row.
struct LinkBox {
  int transfer = 0;  // index into MultiDeviceView::transfers
  double start_ms = 0, width_ms = 0;
};

struct TimelineLayout {
  int rows = 0;  // one-device: the most lanes of any stage
  //! Multi-device: device d's rows are [device_first_row[d], + device_rows[d]);
  //! one-device: {0} and {rows}.
  std::vector<int> device_first_row, device_rows;
  std::vector<StageBox> stages;
  std::vector<OpBox> ops;
  std::vector<LinkBox> links;  // multi-device only
  double total_ms = 0;         // the end of the last box
};

//! One device's schedule: stage k spans [sum of earlier widths, + width),
//! width = latency_ms (or, unpriced, its longest lane's alone sum). Lane l is
//! row l; a merge stage is one box on row 0. Inside a stage each lane's ops
//! are laid end to end, sized by alone_ms (per NodeId; may be empty) and
//! scaled so the longest lane fills the stage; all ops of the stage get equal
//! shares when any alone latency is unknown. Requires the stages' nodes to be
//! operators of a graph alone_ms covers (RenderHtml checks that first).
TimelineLayout LayOutTimeline(const ScheduleRow& schedule, const std::vector<double>& alone_ms);

//! Several devices: device d gets as many rows as its stages' most lanes,
//! stage boxes start at their start_ms (0 when unknown), ops inside as above;
//! transfers become link boxes (zero width when their times are unknown).
TimelineLayout LayOutMultiDevice(const MultiDeviceView& view, const std::vector<double>& alone_ms);

struct GraphLayout {
  std::vector<int> layer;  // per NodeId: longest path from the input (node 0 has layer 0)
  std::vector<double> x;   // per NodeId: position in its layer, centred on the widest layer
  int layers = 0;          // 1 + the largest layer
  int width = 0;           // nodes in the widest layer
  //! Every producer -> consumer edge once, sorted by (consumer, producer).
  std::vector<std::pair<NodeId, NodeId>> edges;
};

//! A layered drawing without dummy nodes: layers by longest path, order in
//! each layer by id, then `sweeps` barycenter passes alternating down (mean
//! position of producers) and up (of consumers). O((V + E) * sweeps + V log V).
//! Requires node ids in topological order (Graph's invariant).
GraphLayout LayOutGraph(const Graph& graph, int sweeps = 4);

}  // namespace ios::report
