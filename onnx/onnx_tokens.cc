// Tokens: a vision transformer's [N, L, C] sequences as feature maps whose
// pixels are the tokens (common/op_kinds_transformer.h). The patch
// convolution's map reshaped to [N, C, L] and transposed to [N, L, C], and
// PyTorch's [L, N, C] and [L*N, C] views around its attention, are the same
// data relabelled: none of them is an operator. What is one: the class
// token and position embedding (embed_tokens), the Gemms over every token
// (1x1 convolutions) and the class token taken out for the head (a pool).
#include <string>
#include <utility>
#include <vector>

#include "common/error.h"
#include "common/op_kinds.h"
#include "common/printable.h"
#include "onnx/importer.h"

namespace ios::onnx_import::detail {
namespace {

using Tokens = Value::Tokens;

bool IsTokens(const Value& v, Tokens tokens) {
  const Value::Kind kind =
      tokens == Tokens::kChannelsFirst ? Value::Kind::kTensor : Value::Kind::kChannelsLast;
  return v.kind == kind && v.tokens == tokens;
}

int64_t TokenCount(const Shape& s) { return int64_t{s.h} * s.w; }

}  // namespace

std::vector<int64_t> Importer::OnnxDims(const Value& v, int64_t batch) const {
  const Shape& s = v.shape;
  const int64_t tokens = TokenCount(s);
  switch (v.kind) {
    case Value::Kind::kConstant:
      return v.constant->dims;
    case Value::Kind::kFlat: {
      std::vector<int64_t> dims = {batch};
      if (v.flat_dims.empty()) return {batch, int64_t{s.c} * tokens};
      dims.insert(dims.end(), v.flat_dims.begin(), v.flat_dims.end());
      return dims;
    }
    case Value::Kind::kGrouped: {
      const int per_group = s.c / v.groups;
      return {batch, v.transposed ? per_group : v.groups, v.transposed ? v.groups : per_group, s.h,
              s.w};
    }
    case Value::Kind::kPadded:
      return {batch, s.c, s.h + int64_t{2} * v.pad.h + v.pad_end_extra.h,
              s.w + int64_t{2} * v.pad.w + v.pad_end_extra.w};
    case Value::Kind::kWithClassToken:
      return {batch, tokens + 1, s.c};
    case Value::Kind::kRollPart:
      return {batch, v.part_axis == 1 ? v.part_end - v.part_begin : s.h,
              v.part_axis == 2 ? v.part_end - v.part_begin : s.w, s.c};
    case Value::Kind::kStridedPhase:
      return {batch, v.phase_y >= 0 ? s.h / v.phase_step : s.h,
              v.phase_x >= 0 ? s.w / v.phase_step : s.w, s.c};
    case Value::Kind::kChannelsLast:
      switch (v.tokens) {
        case Tokens::kBatchFirst:
          return {batch, tokens, s.c};
        case Tokens::kBatchSecond:
          return {tokens, batch, s.c};
        case Tokens::kRows:
          return {batch < 0 ? -1 : tokens * batch, s.c};
        case Tokens::kWindows: {
          const int64_t windows = tokens / (int64_t{v.window} * v.window);
          return {batch < 0 ? -1 : windows * batch, int64_t{v.window} * v.window, s.c};
        }
        case Tokens::kSampleWindows:
          return {batch, tokens / (int64_t{v.window} * v.window), int64_t{v.window} * v.window,
                  s.c};
        default:
          break;
      }
      if (v.window_stage == 1) {
        return {batch, s.h / v.window, v.window, s.w / v.window, v.window, s.c};
      }
      if (v.window_stage == 2) {
        return {batch, s.h / v.window, s.w / v.window, v.window, v.window, s.c};
      }
      return {batch, s.h, s.w, s.c};
    case Value::Kind::kTensor:
    case Value::Kind::kZeroExtended:
      if (v.tokens == Tokens::kChannelsFirst) return {batch, s.c, tokens};
      if (v.window_stage == 3) {
        return {batch, s.c, s.h / v.window, v.window, s.w / v.window, v.window};
      }
      return {batch, s.c, s.h, s.w};
  }
  return {};
}

bool Importer::ReshapeTokens(const ::onnx::NodeProto& node, const Value& x,
                             const std::vector<int64_t>& shape) {
  const int64_t tokens = TokenCount(x.shape), c = x.shape.c;
  const auto batch = [&](int64_t d) { return d == batch_ || d == 0 || d == -1; };
  const auto is = [&](int64_t d, int64_t want) { return d == want || d == -1; };
  Tokens to = Tokens::kNone;
  if (x.kind == Value::Kind::kTensor && x.tokens == Tokens::kNone && shape.size() == 3 &&
      batch(shape[0]) && shape[1] == c && is(shape[2], tokens)) {
    to = Tokens::kChannelsFirst;  // the patches' map, its pixels in a row
  } else if (IsTokens(x, Tokens::kRows) && shape.size() == 3 && shape[0] == tokens &&
             batch(shape[1]) && is(shape[2], c)) {
    to = Tokens::kBatchSecond;
  } else if (IsTokens(x, Tokens::kBatchSecond) && shape.size() == 2 &&
             (shape[0] == tokens * batch_ || shape[0] == -1) && shape[1] == c) {
    to = Tokens::kRows;
  }
  if (to == Tokens::kNone) return false;
  Value relabelled = x;
  relabelled.tokens = to;
  PassedOn(node);
  Define(node, relabelled);
  return true;
}

bool Importer::TransposeTokens(const ::onnx::NodeProto& node, const Value& x,
                               const std::vector<int64_t>& perm) {
  const bool swap_last_two = perm == std::vector<int64_t>{0, 2, 1};
  const bool swap_first_two = perm == std::vector<int64_t>{1, 0, 2};
  Value relabelled = x;
  if (IsTokens(x, Tokens::kChannelsFirst) && swap_last_two) {
    relabelled.kind = Value::Kind::kChannelsLast;
    relabelled.tokens = Tokens::kBatchFirst;
  } else if (IsTokens(x, Tokens::kBatchFirst) && swap_last_two) {
    relabelled.kind = Value::Kind::kTensor;
    relabelled.tokens = Tokens::kChannelsFirst;
  } else if (IsTokens(x, Tokens::kBatchFirst) && swap_first_two) {
    relabelled.tokens = Tokens::kBatchSecond;
  } else if (IsTokens(x, Tokens::kBatchSecond) && swap_first_two) {
    relabelled.tokens = Tokens::kBatchFirst;
  } else if (x.kind == Value::Kind::kChannelsLast && x.window_stage > 0 &&
             perm == std::vector<int64_t>{0, 1, 3, 2, 4, 5}) {
    relabelled.window_stage = 3 - x.window_stage;  // Swin's window partition and its reverse
  } else {
    return false;
  }
  PassedOn(node);
  Define(node, relabelled);
  return true;
}

bool Importer::ConcatClassToken(const ::onnx::NodeProto& node, int64_t axis) {
  if (node.input_size() != 2 || (axis != 1 && axis != -2)) return false;
  const Value& token = Input(node, 0);
  const Value& x = Input(node, 1);
  if (token.kind != Value::Kind::kConstant || !IsTokens(x, Tokens::kBatchFirst)) return false;
  const std::vector<int64_t>& d = token.constant->dims;
  if (d.size() != 3 || (d[0] != 1 && d[0] != batch_) || d[1] != 1 || d[2] != x.shape.c) {
    throw Error(where_ + ": the constant " + token.constant->DimsText() + " before tokens " +
                ShapeText(x) + ": only one learned class token ([1, 1, " +
                std::to_string(x.shape.c) + "]) may be concatenated before tokens");
  }
  const ConstTensor* class_token = token.constant;
  if (d[0] == batch_ && batch_ > 1) {
    // An export at a fixed batch expands the one token to every sample:
    // the first row is the token when every row is the same.
    const ConstTensor& rows = *token.constant;
    const auto c = static_cast<size_t>(x.shape.c);
    bool same = !rows.has_values || (rows.is_float && rows.floats.size() == c * d[0]);
    for (size_t i = c; same && rows.has_values && i < rows.floats.size(); ++i) {
      same = rows.floats[i] == rows.floats[i % c];
    }
    if (!same) {
      throw Error(where_ + ": a class token per sample " + rows.DimsText() +
                  " whose samples differ: only one for every sample ([1, 1, C], expanded) is "
                  "supported");
    }
    ConstTensor& one = held_.emplace_back(rows);
    one.dims = {1, 1, x.shape.c};
    if (one.has_values) one.floats.resize(c);
    class_token = &one;
  }
  Value out = x;
  out.kind = Value::Kind::kWithClassToken;
  out.constant = class_token;
  Define(node, out);
  return true;
}

bool Importer::ImportPositionEmbedding(const ::onnx::NodeProto& node, const Value& x,
                                       const ConstTensor& position) {
  const bool class_token = x.kind == Value::Kind::kWithClassToken;
  if (!class_token && !IsTokens(x, Tokens::kBatchFirst)) return false;
  const int c = x.shape.c;
  const int64_t tokens = TokenCount(x.shape) + (class_token ? 1 : 0);
  const std::vector<int64_t>& d = position.dims;
  const bool fits = (d.size() == 3 && d[0] == 1 && d[1] == tokens && d[2] == c) ||
                    (d.size() == 2 && d[0] == tokens && d[1] == c);
  if (!fits) return false;
  OpParams op = MakeRegisteredOp(RegisteredKind::kEmbedTokens);
  SetAttribute(op.registered, "class_token", class_token ? 1 : 0, where_);
  exec::ConvWeights weights;
  weights.out_channels = c;
  weights.in_per_group = 1;
  weights.kernel_h = static_cast<int>(tokens);
  weights.kernel_w = 1;
  const ConstTensor* token = class_token ? x.constant : nullptr;
  const bool has_values = position.has_values && position.is_float &&
                          (token == nullptr || (token->has_values && token->is_float));
  if (has_values) {
    // ONNX's [L, C] token by token; the kind's C x L channel by channel.
    weights.kernel = Transposed(position.floats, tokens, c);
    if (token != nullptr) weights.bias = token->floats;
  }
  Value out = AddNode(std::move(op), x.terms, TermShapes(x.terms), "EmbedTokens",
                      std::move(weights), has_values);
  out.kind = Value::Kind::kChannelsLast;
  out.tokens = Tokens::kBatchFirst;
  Note(std::string(class_token ? "the class token and " : "") + "the position embedding " +
       Quoted(label_) + " became an embed_tokens operator");
  Define(node, out);
  return true;
}

bool Importer::SlicePhase(const ::onnx::NodeProto& node, const Value& x,
                          const std::vector<int64_t>& axes, const std::vector<int64_t>& starts,
                          const std::vector<int64_t>& ends, const std::vector<int64_t>& steps) {
  const bool map = x.kind == Value::Kind::kChannelsLast && x.tokens == Tokens::kNone &&
                   x.window_stage == 0 && x.roll_y == 0 && x.roll_x == 0;
  if (!map && x.kind != Value::Kind::kStridedPhase) return false;
  if (axes.size() != starts.size() || ends.size() != starts.size()) return false;
  bool any_step = false;
  for (size_t k = 0; k < steps.size(); ++k) any_step = any_step || steps[k] != 1;
  if (!any_step) return false;
  Value phase = x;
  phase.kind = Value::Kind::kStridedPhase;
  bool strided = false;
  for (size_t k = 0; k < axes.size() && k < starts.size() && k < ends.size(); ++k) {
    const int64_t axis = axes[k] < 0 ? axes[k] + 4 : axes[k];
    const int64_t step = k < steps.size() ? steps[k] : 1;
    const std::vector<int64_t> dims = OnnxDims(x, batch_);
    if (step == 1) {
      // Beside a strided axis only whole axes: anything else is another cut.
      const int64_t n = axis >= 0 && axis < static_cast<int64_t>(dims.size()) ? dims[axis] : 0;
      if (starts[k] == 0 && ends[k] >= n) continue;
      throw Error(where_ + ": a strided slice that also cuts axis " + std::to_string(axes[k]) +
                  ": only every step-th row and column of a whole map (Swin's patch merging) "
                  "is supported");
    }
    const int64_t extent = axis == 1 ? x.shape.h : x.shape.w;
    int& at = axis == 1 ? phase.phase_y : phase.phase_x;
    const bool fits = (axis == 1 || axis == 2) && step >= 2 && extent % step == 0 &&
                      starts[k] >= 0 && starts[k] < step && ends[k] >= extent && at < 0 &&
                      (phase.phase_step == 0 || phase.phase_step == step);
    if (!fits) {
      throw Error(where_ + ": a slice of axis " + std::to_string(axis) + " from " +
                  std::to_string(starts[k]) + " by steps of " + std::to_string(step) + " of " +
                  KindText(x) + " " + ShapeText(x) +
                  ": only every step-th row and column from below the step (Swin's patch "
                  "merging, the step dividing the height and width) is supported");
    }
    at = static_cast<int>(starts[k]);
    phase.phase_step = static_cast<int>(step);
    strided = true;
  }
  if (!strided) return false;
  Define(node, phase);
  return true;
}

bool Importer::ConcatPhases(const ::onnx::NodeProto& node, int64_t axis) {
  if (axis != -1 && axis != 3) return false;
  const Value& first = Input(node, 0);
  if (first.kind != Value::Kind::kStridedPhase) return false;
  const int block = first.phase_step;
  bool whole = node.input_size() == int64_t{block} * block;
  for (int i = 0; whole && i < node.input_size(); ++i) {
    const Value& v = Input(node, i);
    // torchvision's order: x[0::2, 0::2], x[1::2, 0::2], x[0::2, 1::2], x[1::2, 1::2].
    whole = v.kind == Value::Kind::kStridedPhase && v.phase_step == block &&
            v.terms == first.terms && v.phase_y == i % block && v.phase_x == i / block;
  }
  if (!whole) {
    throw Error(where_ + ": a Concat of strided slices that are not all " +
                std::to_string(int64_t{block} * block) +
                " phases of one map in Swin's order (rows " +
                "fastest: [0::" + std::to_string(block) + ", 0::" + std::to_string(block) +
                "], [1::" + std::to_string(block) + ", 0::" + std::to_string(block) + "], ...)");
  }
  OpParams op = MakeRegisteredOp(RegisteredKind::kSpaceToDepth);
  SetAttribute(op.registered, "block", block, where_);
  Value out = AddNode(std::move(op), first.terms, TermShapes(first.terms), "PatchMerging");
  out.kind = Value::Kind::kChannelsLast;
  Define(node, out);
  return true;
}

void Importer::ImportGather(const ::onnx::NodeProto& node, const Attributes& attrs) {
  attrs.OnlyKnown({"axis"});
  const Value& x = Input(node, 0);
  const int64_t axis = attrs.Int("axis", 0);
  const ConstTensor& index = ConstInput(node, 1, "index");
  const bool first = index.has_values && index.dims.empty() && index.elements() == 1 &&
                     (index.is_float ? index.floats[0] == 0 : index.ints[0] == 0);
  if (!IsTokens(x, Tokens::kBatchFirst) || (axis != 1 && axis != -2) || !first) {
    throw Error(where_ + ": a Gather of " + KindText(x) + " " + ShapeText(x) + " along axis " +
                std::to_string(axis) + " at " + index.DimsText() +
                ": only taking the first token out of tokens [N, L, C] (index 0 of axis 1: a "
                "class token) is supported on feature maps");
  }
  // A 1x1 window whose stride is the whole map visits only the first pixel.
  OpParams op;
  op.kind = OpKind::kPool;
  op.pool.type = PoolType::kMax;
  op.pool.kernel = {1, 1};
  op.pool.stride = {x.shape.h, x.shape.w};
  Value out = AddNode(std::move(op), x.terms, TermShapes(x.terms), "ClassToken");
  out.kind = Value::Kind::kFlat;
  Define(node, out);
}

void Importer::ImportTokenGemm(const ::onnx::NodeProto& node, const Attributes& attrs,
                               const Value& x) {
  if (!IsTokens(x, Tokens::kRows)) {
    throw Error(where_ + ": its input " + Quoted(node.input(0)) + " is " + KindText(x) +
                "; a Gemm is supported on a flattened feature map or on tokens as rows [L*N, C]");
  }
  if (attrs.Int("transA", 0, kFlagBounds) != 0) {
    throw Error(where_ + ": transA=1 is not supported");
  }
  const bool trans_b = attrs.Int("transB", 0, kFlagBounds) != 0;
  const float alpha = attrs.Float("alpha", 1.0f), beta = attrs.Float("beta", 1.0f);
  const ConstTensor& w = ConstInput(node, 1, "weight");
  const int c = x.shape.c;
  if (w.dims.size() != 2 || w.dims[trans_b ? 1 : 0] != c) {
    throw Error(where_ + ": weight " + w.DimsText() + " (transB=" + (trans_b ? "1" : "0") +
                ") does not multiply the " + std::to_string(c) + " features of each token");
  }
  const int k = Narrow(w.dims[trans_b ? 0 : 1], kExtentBounds, where_,
                       "the output count of the weight " + w.DimsText());
  exec::ConvWeights weights;
  weights.out_channels = k;
  weights.in_per_group = c;
  weights.kernel_h = weights.kernel_w = 1;
  bool has_values = w.has_values && w.is_float;
  if (has_values) {
    std::vector<float> b = TakeFloats(node, 1);
    weights.kernel = trans_b ? Scaled(std::move(b), alpha)
                             : TransposedInPlace(std::move(b), c, k, alpha, scratch_);
  }
  ConvParams conv;
  conv.out_channels = k;
  conv.kernel = {1, 1};
  conv.bias = HasInput(node, 2);
  if (conv.bias) {
    const ConstTensor& b = ConstInput(node, 2, "bias");
    if (b.elements() != k) {
      throw Error(where_ + ": bias " + b.DimsText() + " for " + std::to_string(k) + " outputs");
    }
    has_values = has_values && b.has_values && b.is_float;
    for (float v : b.floats) weights.bias.push_back(beta * v);
  }
  OpParams op;
  op.kind = OpKind::kConv;
  op.conv = conv;
  Define(node, InLayoutOf(AddNode(op, x.terms, TermShapes(x.terms), "TokenGemm", std::move(weights),
                                  has_values),
                          x));
}

}  // namespace ios::onnx_import::detail
