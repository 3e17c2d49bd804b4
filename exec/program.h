// A program: what a backend prepares once and runs many times. One stage
// measured on its own and a whole network under a schedule are both
// programs. Everything a program is — buffers, channel-offset views, which
// lane runs which step, the stacked weights of merged convolutions — is
// decided here on the host, once, so every backend (cpu, cuda) only plays it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/graph.h"
#include "common/stage.h"
#include "exec/weights.h"

namespace ios::exec {

//! A float32 tensor of batch x shape.c x shape.h x shape.w values in NCHW
//! order (the batch size is given at prepare time). Buffers with
//! non-overlapping lifetimes may share a storage `slot`.
struct BufferDesc {
  Shape shape;
  int slot = 0;
  std::string label;  // for messages: the node or role it holds
};

//! Channels [offset, offset + channels) of a buffer, full height and width.
//! At batch 1 it is one contiguous range; at batch B it is B ranges, one
//! per sample, `buffer shape.c * h * w` values apart.
struct View {
  int buffer = -1;
  int offset = 0;
  int channels = 0;
  friend bool operator==(const View&, const View&) = default;
};

//! One primitive operation. `op.kind` is never kInput or kSequential (chains
//! are expanded into steps). Inputs, by kind:
//!   kConv, kPool, kActivation, kRegistered: exactly one view;
//!   kEltwise: two or more views of equal shape, combined by op.eltwise;
//!   kIdentity: one view (a copy) or several of equal shape (their sum).
//! The output never overlaps an input.
struct Step {
  OpParams op;
  std::vector<View> inputs;
  View output;
  int weights = -1;   // kConv: index into Program::weights
  std::string label;  // for messages: node name(s) it computes
};

//! Steps run in order on one thread (cpu) or stream (cuda).
struct Lane {
  std::vector<Step> steps;
};

//! The lanes of a stage run concurrently; the stage ends when all have.
struct ProgramStage {
  std::vector<Lane> lanes;
};

struct Program {
  std::vector<BufferDesc> buffers;
  //! Elements per sample of each storage slot (the largest buffer in it).
  std::vector<int64_t> slot_elements;
  std::vector<ConvWeights> weights;
  std::vector<int> inputs;    // buffers the caller writes before running
  std::vector<View> outputs;  // views the caller reads after running
  std::vector<ProgramStage> stages;

  //! Bytes of activation storage at `batch` (all slots).
  int64_t ActivationBytes(int batch) const;
};

//! Checks that a program is well formed: indices in range, inputs and
//! outputs of each step shaped as its op requires, no output overlapping an
//! input of the same step, no lane of a stage writing storage another lane
//! of it writes or reads (views of different buffers sharing a slot count as
//! overlapping). Throws ios::Error naming the stage, lane, step and field.
void Validate(const Program& program);

//! The program that measures one stage on its own: one input buffer per
//! external, one output buffer per op (a merge stage: one buffer written by
//! the stacked convolution, each member a channel view of it), chains
//! expanded, concatenated or summed inputs gathered by identity steps on
//! the lane that needs them, seeded random weights. Outputs: the last op of
//! every group. No slot is shared.
Program StageProgram(const StageSpec& spec, uint64_t seed = 0);

//! What the memory plan of a network program found.
struct MemoryPlanSummary {
  int64_t peak_live_bytes = 0;  // most bytes alive at once, over stages
  int64_t allocated_bytes = 0;  // storage actually allocated (sum of slots)
  int buffers = 0, slots = 0;
  int concat_views = 0;  // concatenations served as views, without a copy
};

//! A whole network under a schedule: `stages` in execution order cover
//! every operator of `graph` once. One buffer per tensor; an input
//! concatenated from whole producer outputs is one buffer the producers
//! write at channel offsets where no producer is needed at two places;
//! buffers whose last reader has run are reused (first fit, stage
//! granularity). Input: node 0's buffer; output: the graph's last node.
struct NetworkProgram {
  Program program;
  MemoryPlanSummary memory;  // at batch 1
};
NetworkProgram BuildNetworkProgram(const Graph& graph, const std::vector<Stage>& stages,
                                   const WeightStore& weights);

//! The tensors a device's part of a multi-device run exchanges with the
//! other devices (run/multi_device_run.h): those it receives are computed
//! elsewhere and read here; those it sends are computed here and read
//! elsewhere.
struct DeviceProgramIo {
  std::vector<NodeId> received, sent;
};

//! A received tensor's buffer: the caller writes it after stage
//! `first_stage - 1` has run and before `first_stage` (its first reader).
struct ReceivedTensor {
  NodeId node = -1;
  int buffer = -1;
  int first_stage = 0;
};

//! A sent tensor's view: the caller may read it once `stage` has run, until
//! the next run starts (no other tensor reuses its storage).
struct SentTensor {
  NodeId node = -1;
  View view;
  int stage = 0;
};

//! One device's part of a network run over several devices: the program of
//! its `stages` (the operators it runs, in its order), planned like
//! BuildNetworkProgram's, where received tensors get buffers of their own
//! (never channel views of a concatenation buffer: their producers are
//! elsewhere). Program::inputs: `input` (when >= 0) then the received
//! buffers; Program::outputs: the sent views, then `output` when present.
struct DeviceProgram {
  Program program;
  MemoryPlanSummary memory;              // at batch 1
  int input = -1;                        // node 0's buffer; -1 when no operator here reads it
  std::vector<ReceivedTensor> received;  // in io.received's order
  std::vector<SentTensor> sent;          // in io.sent's order
  std::optional<View> output;            // the graph's last node, when computed here
};
//! Throws ios::Error when a stage reads a tensor neither computed in an
//! earlier stage (or earlier in its group) nor received, a received tensor
//! is computed here or read by no stage, or a sent one is not computed here.
DeviceProgram BuildDeviceProgram(const Graph& graph, const std::vector<Stage>& stages,
                                 const WeightStore& weights, const DeviceProgramIo& io);

}  // namespace ios::exec
