// The graph IR: operators on (C,H,W) tensors, grouped into single-entry
// single-exit blocks. The batch size is not part of the graph; it is given
// when a stage is measured.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ios {

struct Shape {
  int c = 0, h = 0, w = 0;
  friend bool operator==(const Shape&, const Shape&) = default;
};

enum class OpKind {
  kInput,
  kConv,
  kPool,
  kActivation,
  kEltwise,
  kIdentity,
  kSequential,
  //! A kind declared in common/op_kinds.h; OpParams::registered says which.
  kRegistered,
};
//! The kinds declared in common/op_kinds.h, each wholly there (name,
//! attributes, shape inference, description, reference arithmetic). Their
//! names, not these values, identify them in keys, files and on the wire.
enum class RegisteredKind {
  kSoftmax,
  kChannelShuffle,
  kLayerNorm,
  kLeakyRelu,
  kHardSigmoid,
  kFlatten,
  kAttention,
  kEmbedTokens,
  kWindowAttention,
  kSpaceToDepth,
};
// Append only (stage keys, the wire). Declared, named and defined in
// common/activation.h.
enum class Activation {
  kNone,
  kRelu,
  kSigmoid,
  kTanh,
  kRelu6,
  kHardSwish,
  kSilu,
  kHardSigmoid,
  kLeakyRelu,
  kGelu,
  kGeluTanh,
};
enum class PoolType { kMax, kAvg, kGlobalMax, kGlobalAvg };
enum class EltwiseType { kAdd, kMul };

struct Window {
  int h = 1, w = 1;
  friend bool operator==(const Window&, const Window&) = default;
};

struct ConvParams {
  int out_channels = 0;
  //! `padding` is added on every side: top and bottom rows, left and right
  //! columns.
  Window kernel, stride, padding{0, 0}, dilation;
  //! Zero rows added at the bottom (h) and columns at the right (w) beyond
  //! `padding`, >= 0: the padded input spans 2*padding + padding_end_extra
  //! per axis. TensorFlow's SAME padding at stride 2 pads the end by one more
  //! than the start (ONNX pads [t, l, b, r] = padding {t, l}, extra {b-t, r-l}).
  Window padding_end_extra{0, 0};
  int groups = 1;
  bool bias = true;
  Activation act = Activation::kNone;
  friend bool operator==(const ConvParams&, const ConvParams&) = default;
};

struct PoolParams {
  PoolType type = PoolType::kMax;
  Window kernel, stride, padding{0, 0};
  //! Max pooling only: the output size rounds up (ONNX/PyTorch ceil_mode),
  //! so the last window may run past the input and its padding on the
  //! right and bottom; a window must still start inside them.
  bool ceil = false;
  //! Average pooling only: the divisor counts the window's taps inside the
  //! input, not its padding (ONNX count_include_pad=0, PyTorch
  //! count_include_pad=False). IOS's own average pools count the padding.
  bool exclude_padding = false;
  friend bool operator==(const PoolParams&, const PoolParams&) = default;
};

//! An operator of a kind declared in common/op_kinds.h.
struct RegisteredOp {
  RegisteredKind kind = RegisteredKind::kSoftmax;
  //! One value per attribute the kind declares, in its order.
  std::vector<int> attributes;
  friend bool operator==(const RegisteredOp&, const RegisteredOp&) = default;
};

//! What an operator computes, independent of where its inputs come from.
//! Only the fields of `kind` are meaningful. A kSequential op applies
//! `chain[0]` to its inputs and each later element to the previous output,
//! and is scheduled as one operator (e.g. relu -> depthwise -> pointwise).
struct OpParams {
  OpKind kind = OpKind::kIdentity;
  ConvParams conv;
  PoolParams pool;
  Activation act = Activation::kRelu;  // kActivation
  EltwiseType eltwise = EltwiseType::kAdd;
  std::vector<OpParams> chain;  // kSequential
  RegisteredOp registered;      // kRegistered
  friend bool operator==(const OpParams&, const OpParams&) = default;
};

using NodeId = int;

//! Channels [begin, end) of a producer's output.
struct Slice {
  NodeId producer = -1;
  int begin = 0, end = 0;
  int channels() const { return end - begin; }
  friend bool operator==(const Slice&, const Slice&) = default;
};

//! The IOS input model: the slices of one term are summed element-wise, the
//! terms are concatenated along channels (so concat costs nothing). For
//! kEltwise the terms are instead combined element-wise (add or mul).
using Term = std::vector<Slice>;
using Inputs = std::vector<Term>;

struct Node {
  std::string name;
  std::string hint;  // free-form label (e.g. "ReluSepConv")
  OpParams op;
  Inputs inputs;
  Shape output;  // filled by InferShapes
};

//! A single-entry single-exit region. `inner` and `exit` are the operators
//! to schedule; `enter` is the network input or the previous block's exit.
struct Block {
  NodeId enter = -1;
  std::vector<NodeId> inner;
  NodeId exit = -1;
  //! Optional explicit split of inner+exit into parts scheduled one after
  //! another (NASNet cuts its single block at cell outputs). Empty: the
  //! search splits by its maximum part size.
  std::vector<std::vector<NodeId>> parts;

  //! inner followed by exit, in topological order.
  std::vector<NodeId> Operators() const;
};

//! The nodes `node` reads, each once, in increasing id order.
std::vector<NodeId> DistinctProducers(const Node& node);

//! The network. Node 0 is the input; nodes are stored in topological order.
struct Graph {
  std::string name;
  std::vector<Node> nodes;
  std::vector<Block> blocks;

  const Node& node(NodeId id) const { return nodes.at(id); }
  //! Index of the node with this name, or nullopt.
  std::optional<NodeId> Find(const std::string& node_name) const;
  //! Number of schedulable operators (all nodes but the input).
  int OperatorCount() const { return static_cast<int>(nodes.size()) - 1; }
};

//! Channels, height and width of the tensor an op reads (its terms
//! concatenated). Throws ios::Error naming `where` when terms disagree.
Shape InputShape(const std::vector<Shape>& term_shapes, const std::string& where);

//! The shape element-wise terms combine to: the largest term's, every other
//! term equal to it or C x 1 x 1 (applied to each pixel of its channel).
//! Empty, with the message in `why`, when a term is neither.
std::optional<Shape> EltwiseShape(const std::vector<Shape>& term_shapes, std::string* why);

//! Output shape of `op` applied to `inputs`, whose term shapes are given.
//! Throws ios::Error naming `where` and the offending field.
Shape InferOpOutput(const OpParams& op, const std::vector<Shape>& term_shapes,
                    const std::string& where);

//! Checks structure (names, producers, order, blocks) and fills every
//! node's output shape. Throws ios::Error naming the node and the field
//! (cycle / producer defined later, unknown producer, slice out of range,
//! channel or spatial mismatch, empty output), and refuses what no worker
//! can measure (common/limits.h), naming the node, the field and the limit.
void InferShapes(Graph& graph);

//! Checks that each block's exit is its only sink: every other operator of a
//! block is read by an operator of the same block, and the exit reads at
//! least one of them (unless the block has no other operator). Otherwise an
//! operator would be scheduled and priced for a value nobody uses. Throws
//! ios::Error naming the block and the node. Requires InferShapes to have
//! passed. The loader applies it to every model file; graphs built in code
//! (DP tests with several sinks) may skip it.
void CheckSingleSinkBlocks(const Graph& graph);

//! "CxHxW", e.g. "64x56x56": how messages and keys print a shape.
std::string ShapeText(const Shape& shape);

//! Readable op summary, e.g. "conv 3x3/1 64 relu".
std::string Describe(const OpParams& op);

const char* ToString(OpKind kind);
//! The kind's name, a registered kind's own ("softmax") included.
std::string KindName(const OpParams& op);
const char* ToString(Activation act);
const char* ToString(PoolType type);

}  // namespace ios
