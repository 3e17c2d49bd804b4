// Internal to onnx/: the importer's state while it turns one ONNX graph into
// the IR. The model-level work (opset, inputs, constants, the values ONNX
// names stand for, the graph under construction, the output and the finished
// model) is in onnx_import.cc; what each ONNX operator becomes is in
// onnx_operators.cc and onnx_combine.cc.
#pragma once

#include <onnx/onnx_pb.h>

#include <array>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/graph.h"
#include "exec/weights.h"
#include "onnx/onnx_formulas.h"
#include "onnx/onnx_import.h"
#include "onnx/onnx_tensors.h"

namespace ios::onnx_import::detail {

//! What an ONNX tensor name stands for while importing.
struct Value {
  enum class Kind {
    kTensor,    // a (C,H,W) feature map: the IR inputs that read it
    kFlat,      // a feature map flattened to (C*H*W) by Flatten
    kPadded,    // a feature map with zero padding still to apply (Pad)
    kConstant,  // an initializer, a Constant or a weight without values
    kGrouped,   // a feature map viewed as (N, groups, C/groups, H, W): a channel shuffle's middle
    kChannelsLast,  // a feature map transposed to (N, H, W, C): per-position operators read it
    kZeroExtended,  // terms, then `zero_channels` channels of zeros (TF's channel padding)
    //! Tokens (a channels-last view, `tokens` kBatchFirst) with a learned
    //! class token first: only the Add of a position embedding reads it.
    kWithClassToken,
    //! Every `phase_step`-th row (from phase_y) and or column (from
    //! phase_x) of a channels-last map: a quarter of Swin's patch merging,
    //! which only the Concat of all the phases reads.
    kStridedPhase,
    //! Rows or columns [part_begin, part_end) of a channels-last map: half
    //! of a torch.roll, which only the Concat of both halves reads.
    kRollPart,
  };
  //! A feature map seen as a sequence of tokens: its pixels in row-major
  //! order, L = H*W of them (a transformer's; op_kinds_transformer.h). The
  //! data is the same in every view; only the ONNX dimensions differ.
  enum class Tokens {
    kNone,
    kChannelsFirst,  // kTensor: [N, C, L] (the patches reshaped, before a Transpose)
    kBatchFirst,     // kChannelsLast: [N, L, C]
    kBatchSecond,    // kChannelsLast: [L, N, C] (PyTorch's multi-head attention)
    kRows,           // kChannelsLast: [L*N, C] (a Gemm over every token)
    kWindows,        // kChannelsLast: [N*windows, window^2, C] (Swin's partition)
    kSampleWindows,  // kChannelsLast: [N, windows, window^2, C] (MaxViT's partitions)
  };
  Kind kind = Kind::kTensor;
  Inputs terms;                           // kTensor, kFlat, kPadded
  Shape shape;                            // of the feature map (before flattening or padding)
  Window pad{0, 0};                       // kPadded: on every side
  const ConstTensor* constant = nullptr;  // kConstant
  std::string made_by;                    // "node 'x' (Pad)", for messages
  int groups = 0;                         // kGrouped
  bool transposed = false;                // kGrouped: viewed as (N, C/groups, groups, H, W)
  Window pad_end_extra{0, 0};             // kPadded: more at the bottom and right
  int zero_channels = 0;                  // kZeroExtended: after the terms, in shape.c
  //! kFlat: in (H, W, C) order, a Reshape of a channels-last map (TF's
  //! output heads); only a graph output may be one (FinishOutput).
  bool flat_channels_last = false;
  //! kFlat: the dimensions after the batch when not [C*H*W] (a Reshape to
  //! [N, anchors, k]), for the check against ONNX's shapes.
  std::vector<int64_t> flat_dims{};
  Tokens tokens = Tokens::kNone;   // kTensor, kChannelsLast, kWithClassToken
  int phase_y = -1, phase_x = -1;  // kStridedPhase: the first row and column, -1: every one
  int phase_step = 0;              // kStridedPhase
  //! Swin's views of a channels-last map (onnx_windows.cc): rolled (row r of
  //! the view is row (r + roll_y) % H of the map, columns alike), and cut
  //! into window x window windows: window_stage 1 is [N, H/w, w, W/w, w, C],
  //! 2 is [N, H/w, W/w, w, w, C], tokens kWindows the windows' tokens.
  //! MaxViT's (onnx_maxvit.cc): stage 3, a kTensor [N, C, H/w, w, W/w, w];
  //! `grid` windows of pixels spread over the map (op_kinds_transformer.h).
  int roll_y = 0, roll_x = 0;
  int window = 0, window_stage = 0;
  bool grid = false;
  int part_axis = 0, part_begin = 0, part_end = 0;  // kRollPart
};

//! Whether a * b == product for dimensions from a file, without the
//! multiplication (which a crafted value could overflow).
inline bool Times(int64_t a, int64_t b, int64_t product) {
  return a > 0 && b > 0 && product % a == 0 && product / a == b;
}

//! Whether a window attention's bias constant is [.., heads, size, size]
//! with nothing but 1s before: its values then in the kind's order.
inline bool BiasShaped(const ConstTensor& bias, int64_t heads, int64_t size) {
  const std::vector<int64_t>& d = bias.dims;
  if (d.size() < 3 || d[d.size() - 3] != heads || d[d.size() - 2] != size || d.back() != size) {
    return false;
  }
  for (size_t i = 0; i + 3 < d.size(); ++i) {
    if (d[i] != 1) return false;
  }
  return true;
}

//! `out` in `x`'s layout: the same kind and token view (an operator that
//! works per position keeps both).
inline Value InLayoutOf(Value out, const Value& x) {
  out.kind = x.kind;
  out.tokens = x.tokens;
  out.roll_y = x.roll_y;
  out.roll_x = x.roll_x;
  out.window = x.window;
  out.window_stage = x.window_stage;
  out.grid = x.grid;
  return out;
}

//! Whether `a` and `b` are the same view of their maps (an element-wise
//! operator may combine them).
inline bool SameView(const Value& a, const Value& b) {
  return a.kind == b.kind && a.tokens == b.tokens && a.roll_y == b.roll_y && a.roll_x == b.roll_x &&
         a.window == b.window && a.window_stage == b.window_stage && a.grid == b.grid;
}

//! Zero padding as ONNX gives it per side, in the IR's terms: `begin` on
//! every side, `end_extra` more at the bottom and right (TensorFlow's SAME
//! padding at stride 2). More at the top or left is not representable.
struct Pads {
  Window begin{0, 0};
  Window end_extra{0, 0};
  bool symmetric() const { return end_extra == Window{0, 0}; }
};

//! An IR operator with the weights it will get, while the graph is built.
class NodeChains;  // onnx_chains.h

struct Pending {
  Node node;
  bool has_weights = false;
  exec::ConvWeights weights;  // kConv
  //! An affine operator folded into the convolution that reads it: left
  //! out of the graph, and not counted as dropped (it was not).
  bool folded_forward = false;
};

//! Imports one checked, shape-inferred ONNX model; one use.
class Importer {
 public:
  //! `initializers`: the values of `model`'s, in its order (read before,
  //! while the file was mapped: onnx_import.cc's ReadBytes).
  Importer(::onnx::ModelProto& model, std::string source, std::vector<ConstTensor> initializers)
      : model_(model), source_(std::move(source)), initializers_(std::move(initializers)) {}

  ImportedModel Run();

 private:
  // ---- Model-level checks ------------------------------------------------------

  void CheckOpset();

  void CountReaders();

  //! The one feature-map input (N,C,H,W float); other inputs without an
  //! initializer are weights whose values the file does not carry.
  void AddInputs();

  void AddConstant(ConstTensor tensor);

  //! Whether every reader of the graph input `name` is a Transpose with perm
  //! [0, 3, 1, 2] (an N,H,W,C input made N,C,H,W), and there is one.
  bool ReadOnlyByTransposesToChannelsFirst(const std::string& name) const;

  // ---- Nodes -------------------------------------------------------------------

  //! Maps one ONNX node onto IR operators (onnx_operators.cc).
  void ImportNode(const ::onnx::NodeProto& node, int index);

  const Value& Input(const ::onnx::NodeProto& node, int i) const;

  bool HasInput(const ::onnx::NodeProto& node, int i) const;

  //! A feature map input (not flattened, not padded).
  const Value& MapInput(const ::onnx::NodeProto& node, int i) const;

  const ConstTensor& ConstInput(const ::onnx::NodeProto& node, int i, const std::string& role);

  //! The float values of the constant input `i` of `node`, moved out of it
  //! when `node` is its only reader (a weight is then in memory once, and
  //! no copy makes a second pass over fresh pages), else Copied.
  std::vector<float> TakeFloats(const ::onnx::NodeProto& node, int i);

  static std::string KindText(const Value& v);

  //! Binds `node`'s first output to `value`, once ONNX's inferred shape of
  //! it agrees (CheckInferredShape).
  void Define(const ::onnx::NodeProto& node, Value value);

  //! Binds the tensor `name` (one of the current node's outputs) to `value`,
  //! once: Define's check of the inferred shape, for each output of a node
  //! with several (Split).
  void DefineOutput(const std::string& name, Value value);

  //! Refuses `value` as tensor `name` when ONNX's shape inference gave it
  //! another shape (where it inferred one): the importer computes every
  //! shape itself, and two answers mean one reads the file otherwise.
  void CheckInferredShape(const std::string& name, const Value& value) const;

  std::string UniqueName(std::string name);

  //! Defines `node`'s output as `op` applied to `x`, an operator that keeps
  //! its input's shape (activation, softmax): flat or a map, as `x` is.
  void DefineShapeKeeping(const ::onnx::NodeProto& node, const Value& x, OpParams op);

  //! Appends an IR operator reading `inputs`; returns its feature map.
  Value AddNode(OpParams op, const Inputs& inputs, const std::vector<Shape>& term_shapes,
                std::string hint, exec::ConvWeights weights = {}, bool has_weights = false);

  std::vector<Shape> TermShapes(const Inputs& inputs) const;

  //! The one IR operator a feature map is the whole output of, when the
  //! ONNX tensor is read by nothing but `node` (so the operator may be
  //! rewritten in place: a Dropout or Identity between them passes its one
  //! reader on, and a second reader anywhere shows in the count).
  //! `v` is the node's input `input` (0 unless said).
  Pending* SoleProducer(const ::onnx::NodeProto& node, const Value& v, int input = 0);

  //! Whether tensor `name` is read `reads` times and, through the operators
  //! that pass a value on unchanged (Identity, Transpose, Flatten), what it
  //! passes on was read by nothing else either.
  bool ReadOnlyBy(const std::string& name, int reads) const;

  //! Records that `node`'s output is its input `input` passed on unchanged.
  void PassedOn(const ::onnx::NodeProto& node, int input = 0);

  //! ONNX's [top, left, bottom, right] `pads` attribute.
  Pads SidePads(const std::vector<int64_t>& pads, const std::string& attr) const;

  //! A 2-D window attribute (kernel_shape, strides, dilations), each value
  //! in kExtentBounds; `fallback` for both when absent.
  Window Pair(const Attributes& attrs, const std::string& attr, int fallback) const;

  //! Padding from auto_pad (or the explicit pads when NOTSET).
  Pads Padding(const Attributes& attrs, const Shape& in, Window kernel, Window stride,
               Window dilation) const;

  // ---- Operators (onnx_operators.cc, onnx_combine.cc) ---------------------------

  void ImportConv(const ::onnx::NodeProto& node, const Attributes& attrs);

  //! Inference-mode batch norm is a per-channel affine map y = a x + b:
  //! folded into the convolution that is its only input (exact), or else a
  //! depthwise 1x1 convolution with a and b as its weights and bias (the
  //! same map as an operator: DenseNet normalises concatenations).
  void ImportBatchNorm(const ::onnx::NodeProto& node, const Attributes& attrs);

  //! HardSigmoid and LeakyRelu at the one setting each that stage keys
  //! know, PyTorch's defaults; other settings are refused.
  void ImportParameterizedActivation(const ::onnx::NodeProto& node, const Attributes& attrs);

  void ImportActivation(const ::onnx::NodeProto& node, Activation act,
                        const std::vector<std::string>& attributes = {});

  //! Softmax over channels only: axis 1 of N x C (a classifier's output)
  //! or of N x C x H x W. Below opset 13 the input is flattened from the
  //! axis on, which is the same only where H x W is 1.
  void ImportSoftmax(const ::onnx::NodeProto& node, const Attributes& attrs, bool log);

  //! Clip to [0, +inf) is a relu, to [0, 6] a relu6; other bounds are not
  //! supported.
  void ImportClip(const ::onnx::NodeProto& node, const Attributes& attrs);

  void ImportPool(const ::onnx::NodeProto& node, const Attributes& attrs);

  void ImportGlobalPool(const ::onnx::NodeProto& node);

  Value GlobalPool(const ::onnx::NodeProto& node, bool max);

  //! The mean (max) over height and width is a global average (max) pool,
  //! as PyTorch exports `x.mean([2, 3])` (MNASNet); keepdims=0 leaves the
  //! N x C a fully connected layer reads. Other axes are refused.
  void ImportSpatialReduce(const ::onnx::NodeProto& node, const Attributes& attrs);

  //! Zero padding of height and width, kept for the Conv or AveragePool
  //! that reads it (which pads the same way).
  void ImportPad(const ::onnx::NodeProto& node, const Attributes& attrs);

  //! Concatenation costs nothing in the IR: readers read the terms.
  void ImportConcat(const ::onnx::NodeProto& node, const Attributes& attrs);

  void ImportElementwise(const ::onnx::NodeProto& node);

  //! y + [x; 0]: the residual of a block whose input was padded with zero
  //! channels (TensorFlow's MobileNet-style blocks) is concat(y[0:C] + x,
  //! y[C:]). `padded` is the kZeroExtended operand.
  void AddZeroExtended(const ::onnx::NodeProto& node, const Value& y, const Value& padded);

  //! Mul(x, Sigmoid(x)) is x * sigmoid(x): SiLU, and Mul(x, HardSigmoid(x))
  //! is hardswish, as PyTorch exports them (the latter below opset 14). The
  //! gate operator becomes the product's activation, or, when x is a
  //! convolution's output read by nothing else, that convolution's activation
  //! (the gate operator is then read by nobody and dropped).
  bool FoldGatedActivation(const ::onnx::NodeProto& node, const Value& a, const Value& b);

  std::string ShapeText(const Value& v) const;

  //! A feature map made of several terms (a concatenation) as one operator's
  //! output, for readers that need a single term.
  Value Materialize(const Value& v, const std::string& suffix = "");

  // ---- Per-channel affine maps (onnx_affine.cc) -------------------------------------

  //! Mul or Add of a feature map and a constant with one value per channel
  //! (or one for all): folded into the convolution that is its only input,
  //! or else a per-channel affine operator (a depthwise 1x1 convolution).
  //! False when the constant is not per channel.
  bool ImportChannelConstant(const ::onnx::NodeProto& node, const Value& x, int x_input,
                             const ConstTensor& constant);

  //! y = a conv(x) + b as the convolution's own weights and bias (`a`, `b`
  //! one value per output channel, or empty when the file has no values).
  void FoldAffineOutput(Pending& conv, const std::vector<double>& a, const std::vector<double>& b,
                        bool has_values);

  //! The depthwise 1x1 convolution y = a x + b that per-channel constants
  //! and unfoldable norms become (`a`, `b` empty when the file has no values).
  //! PRelu with a slope per channel (onnx_affine.cc); false when the slope
  //! is not one value per channel of a feature map.
  bool ImportChannelPRelu(const ::onnx::NodeProto& node, const ConstTensor& slope);
  Value AffineOperator(const Value& x, std::vector<float> a, std::vector<float> b,
                       const std::string& hint);

  //! A per-channel affine operator read by nothing but a convolution without
  //! padding becomes part of that convolution (exact up to rounding: every
  //! input channel of the kernel is scaled, the shift goes into the bias).
  //! `inputs` are the convolution's and become the affine operator's own.
  void FoldAffineInput(const ::onnx::NodeProto& node, const Value& x, ConvParams& conv,
                       exec::ConvWeights& weights, bool& has_values, Inputs& inputs);

  //! MatMul of a channels-last feature map by a constant [C, K]: a 1x1
  //! convolution to K channels (ConvNeXt's pointwise layers).
  void ImportChannelsLastMatMul(const ::onnx::NodeProto& node, const Value& x);

  void ImportFlatten(const ::onnx::NodeProto& node, const Attributes& attrs);

  void Flatten(const ::onnx::NodeProto& node, const Value& x);

  //! Reshape to (N, C*H*W) is a flatten; anything else is refused.
  void ImportReshape(const ::onnx::NodeProto& node);

  //! out = x W (+ b) over a flattened feature map of C*H*W values is a
  //! convolution whose kernel covers the whole map: same sums, same order.
  void ImportFullyConnected(const ::onnx::NodeProto& node, const Attributes& attrs);

  void ImportPassThrough(const ::onnx::NodeProto& node);

  void ImportConstantNode(const ::onnx::NodeProto& node, const Attributes& attrs);

  // ---- GELU chains (onnx_gelu.cc) --------------------------------------------------

  //! Finds every GELU written as its formula before any node is imported.
  void FindGelus(const NodeChains& chains);

  void ImportGelu(const ::onnx::NodeProto& node, const GeluMatch& match);

  // ---- LayerNorm (onnx_layernorm.cc) ---------------------------------------------

  //! Finds every LayerNorm written as its formula before any node is imported.
  void FindLayerNorms(const NodeChains& chains);

  void ImportLayerNormChain(const ::onnx::NodeProto& node, const LayerNormMatch& match);

  //! ONNX's LayerNormalization (opset 17): the normalisation, then its scale
  //! and bias as per-channel constants.
  void ImportLayerNormalization(const ::onnx::NodeProto& node, const Attributes& attrs);

  //! layernorm(eps) over the channels of `x`, normalised along `axes`
  //! (the last of a channels-last map, or 1 of an N,C,H,W one).
  Value LayerNorm(const Value& x, const std::vector<int64_t>& axes, double eps);

  // ---- Transformers (onnx_attention.cc, onnx_tokens.cc) -----------------------------

  //! Finds every attention block before any node is imported.
  void FindAttentions(const NodeChains& chains);

  //! The attention(heads) operator over the matched queries, keys and values.
  void ImportAttention(const ::onnx::NodeProto& node, const AttentionMatch& match);

  //! An attention's queries, keys and values (`names`): values of earlier
  //! nodes, channels-last `tokens`, all of one shape and view; else an
  //! error whose line ends in `expected`.
  std::array<const Value*, 3> AttentionOperands(const std::array<std::string, 3>& names,
                                                Value::Tokens tokens,
                                                const std::string& expected) const;

  //! A window attention's score bias `name`, a constant [heads, size, size]
  //! (without values in a structure-only file), as its operator's weights.
  exec::ConvWeights ScoreBias(const std::string& name, int heads, int64_t size) const;

  //! The ONNX dimensions of `v` with `batch` as N (-1: symbolic; a
  //! dimension that is a multiple of N is then -1 too).
  std::vector<int64_t> OnnxDims(const Value& v, int64_t batch) const;

  //! Reshapes between token views (the patches to [N, C, L], [L*N, C] and
  //! [L, N, C]): defines the output and returns true, or false.
  bool ReshapeTokens(const ::onnx::NodeProto& node, const Value& x,
                     const std::vector<int64_t>& shape);

  //! Transposes between token views ([N, C, L] and [N, L, C]; [N, L, C] and
  //! [L, N, C]): defines the output and returns true, or false.
  bool TransposeTokens(const ::onnx::NodeProto& node, const Value& x,
                       const std::vector<int64_t>& perm);

  //! Concat on the token axis of a learned class token and the tokens.
  bool ConcatClassToken(const ::onnx::NodeProto& node, int64_t axis);

  //! Add of a [1, L, C] constant to tokens (with a class token or not): one
  //! embed_tokens operator with both as its weights. False when the
  //! constant is not a position embedding of `x`.
  bool ImportPositionEmbedding(const ::onnx::NodeProto& node, const Value& x,
                               const ConstTensor& position);

  //! Gather of one token ([N, C] out of [N, L, C]): the class token, as a
  //! 1x1 max pool whose stride leaves the first pixel alone.
  void ImportGather(const ::onnx::NodeProto& node, const Attributes& attrs);

  //! Slices of every step-th row or column of a channels-last map (Swin's
  //! patch merging): defines a kStridedPhase value and returns true, or
  //! false when the slice is not one.
  bool SlicePhase(const ::onnx::NodeProto& node, const Value& x, const std::vector<int64_t>& axes,
                  const std::vector<int64_t>& starts, const std::vector<int64_t>& ends,
                  const std::vector<int64_t>& steps);

  //! The Concat on the channels of all block x block phases of one map, in
  //! torchvision's order: one space_to_depth(block) operator.
  bool ConcatPhases(const ::onnx::NodeProto& node, int64_t axis);

  // ---- Swin's windows (onnx_windows.cc) -------------------------------------------

  void FindWindowAttentions(const NodeChains& chains);
  void ImportWindowAttention(const ::onnx::NodeProto& node, const WindowAttentionMatch& match);
  //! A Slice of rows or columns of a channels-last map: half a roll.
  bool SliceRollPart(const ::onnx::NodeProto& node, const Value& x,
                     const std::vector<int64_t>& axes, const std::vector<int64_t>& starts,
                     const std::vector<int64_t>& ends, const std::vector<int64_t>& steps);
  //! The Concat of both halves of a roll: the map rolled.
  bool ConcatRoll(const ::onnx::NodeProto& node, int64_t axis);
  //! The Reshapes of Swin's window partition and its reverse.
  bool ReshapeWindows(const ::onnx::NodeProto& node, const Value& x,
                      const std::vector<int64_t>& shape);

  // ---- MaxViT's block and grid windows (onnx_maxvit.cc) ---------------------------

  void FindSampleWindowAttentions(const NodeChains& chains);
  void ImportSampleWindowAttention(const ::onnx::NodeProto& node,
                                   const SampleWindowAttentionMatch& match);
  //! The partitions of a channels-first map into blocks and their reverse.
  bool ReshapeSampleWindows(const ::onnx::NodeProto& node, const Value& x,
                            const std::vector<int64_t>& shape);
  bool TransposeSampleWindows(const ::onnx::NodeProto& node, const Value& x,
                              const std::vector<int64_t>& perm);

  //! Gemm over every token of [L*N, C] (transB): a 1x1 convolution.
  void ImportTokenGemm(const ::onnx::NodeProto& node, const Attributes& attrs, const Value& x);

  // ---- Constant folding (onnx_fold.cc) -------------------------------------------

  //! Shape arithmetic on constants (and Shape of any value, whose shape is
  //! static) becomes a constant; false when `node` is not such arithmetic.
  bool FoldConstants(const ::onnx::NodeProto& node, const Attributes& attrs);

  bool FoldShape(const ::onnx::NodeProto& node, const Attributes& attrs);

  bool FoldExpandOfWeight(const ::onnx::NodeProto& node, const Attributes& attrs);

  // ---- Channel moves (onnx_layout.cc) ----------------------------------------------

  Value SliceChannels(const Value& x, int begin, int end) const;

  void ImportSlice(const ::onnx::NodeProto& node, const Attributes& attrs);

  void ImportSplit(const ::onnx::NodeProto& node, const Attributes& attrs);

  void ImportTranspose(const ::onnx::NodeProto& node, const Attributes& attrs);

  bool GroupChannels(const ::onnx::NodeProto& node, const Value& x,
                     const std::vector<int64_t>& shape);

  bool UngroupChannels(const ::onnx::NodeProto& node, const Value& x,
                       const std::vector<int64_t>& shape);

  void Note(std::string text) { notes_.push_back(std::move(text)); }

  // ---- The output and the finished graph (onnx_output.cc) ----------------------

  void FinishOutput();
  //! The IR terms of graph output `out`: its own for one in (N, C, H, W)
  //! order when `alone`, else one vector per sample (a flatten operator
  //! unless it is one already).
  Inputs OutputTerms(const Value& out, bool alone);
  //! Whether `name` is a graph output that no node reads.
  bool OnlyAGraphOutput(const std::string& name) const;
  //! A Reshape whose result is only a graph output: defines it and returns
  //! true.
  bool OutputReshape(const ::onnx::NodeProto& node, const Value& x, const ConstTensor& shape);

  //! Keeps the operators the output depends on, renumbered in order.
  ImportedModel Assemble();

  // ---- State --------------------------------------------------------------

  ::onnx::ModelProto& model_;
  std::string source_;
  std::vector<ConstTensor> initializers_;  // until Run holds them
  int64_t opset_ = 0;
  std::deque<ConstTensor> held_;  // constants; Values point into it
  std::vector<float> scratch_;    // TransposedInPlace's, kept between weights
  std::map<std::string, Value> values_;
  std::map<std::string, const ::onnx::TypeProto*> inferred_;  // ONNX's types, by tensor name
  std::map<std::string, int> readers_;                        // ONNX readers per tensor name
  std::vector<Pending> pending_;
  std::set<std::string> names_;
  std::vector<std::string> notes_;
  std::string where_, label_;
  bool have_input_ = false;
  int batch_ = 1;
  int folded_ = 0;                                     // nodes FoldConstants turned into constants
  std::map<std::string, GeluMatch> gelus_;             // by the output of a chain's last Mul
  std::map<std::string, LayerNormMatch> layer_norms_;  // by the output of a chain's Div
  std::map<std::string, AttentionMatch> attentions_;   // by the output of the final Reshape
  std::map<std::string, WindowAttentionMatch> window_attentions_;               // likewise
  std::map<std::string, SampleWindowAttentionMatch> sample_window_attentions_;  // likewise
  // Outputs of the nodes inside a recognised formula (GELU, LayerNorm): not imported.
  std::set<std::string> formula_inner_;
  std::map<std::string, std::string> passed_on_;  // output -> the input it is unchanged
  bool fixed_batch_ = false;                      // the file gives the batch a size
  bool input_channels_last_ = false;              // the graph input is N,H,W,C
  NodeId sink_ = -1;
  std::vector<ModelOutput> outputs_;  // the graph's, in order
};

}  // namespace ios::onnx_import::detail
