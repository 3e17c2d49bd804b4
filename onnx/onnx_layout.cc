// Operators that move channels without arithmetic: Slice and Split along the
// channels (ShuffleNet's chunk), the Reshape -> Transpose -> Reshape of a
// channel shuffle, and the Transposes to channels-last and back around
// per-position layers. Slices cost nothing in the IR (a reader reads a channel
// range of its producer); the shuffle is one channel_shuffle operator.
#include <cstdint>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/op_kinds.h"
#include "common/printable.h"
#include "onnx/importer.h"

namespace ios::onnx_import::detail {
namespace {

std::vector<int64_t> Ints(const ConstTensor& t) {
  if (t.is_float) {
    std::vector<int64_t> values;
    for (float f : t.floats) values.push_back(static_cast<int64_t>(f));
    return values;
  }
  return t.ints;
}

}  // namespace

//! Channels [begin, end) of a feature map: each term is cut where the range
//! crosses it, and each summed slice of a term at the same offsets.
Value Importer::SliceChannels(const Value& x, int begin, int end) const {
  Value out;
  out.kind = Value::Kind::kTensor;
  out.shape = {end - begin, x.shape.h, x.shape.w};
  int offset = 0;
  for (const Term& term : x.terms) {
    const int channels = term.at(0).channels();
    const int from = std::max(begin, offset), to = std::min(end, offset + channels);
    if (from < to) {
      Term cut;
      for (const Slice& s : term) {
        cut.push_back({s.producer, s.begin + (from - offset), s.begin + (to - offset)});
      }
      out.terms.push_back(std::move(cut));
    }
    offset += channels;
  }
  return out;
}

void Importer::ImportSlice(const ::onnx::NodeProto& node, const Attributes& attrs) {
  if (opset_ < 10) {
    throw Error(where_ + ": Slice below opset 10 (starts and ends as attributes) is not supported");
  }
  attrs.OnlyKnown({});
  const Value& x = Input(node, 0);
  if (x.kind != Value::Kind::kChannelsLast && x.kind != Value::Kind::kStridedPhase) {
    MapInput(node, 0);
  }
  const std::vector<int64_t> starts = Ints(ConstInput(node, 1, "starts"));
  const std::vector<int64_t> ends = Ints(ConstInput(node, 2, "ends"));
  std::vector<int64_t> axes =
      HasInput(node, 3) ? Ints(ConstInput(node, 3, "axes")) : std::vector<int64_t>{};
  const std::vector<int64_t> steps =
      HasInput(node, 4) ? Ints(ConstInput(node, 4, "steps")) : std::vector<int64_t>{};
  if (axes.empty()) {
    for (size_t d = 0; d < starts.size(); ++d) axes.push_back(static_cast<int64_t>(d));
  }
  if (SlicePhase(node, x, axes, starts, ends, steps) ||
      SliceRollPart(node, x, axes, starts, ends, steps)) {
    return;
  }
  if (x.kind == Value::Kind::kStridedPhase) MapInput(node, 0);
  // The channels are axis 1, or the last axis of a channels-last view or tokens.
  const std::vector<int64_t> extent = OnnxDims(x, batch_);
  const auto rank = static_cast<int64_t>(extent.size());
  const int64_t channel_axis = x.kind == Value::Kind::kChannelsLast ? rank - 1 : 1;
  int begin = 0, end = x.shape.c;
  for (size_t k = 0; k < axes.size(); ++k) {
    const int64_t axis = axes[k] < 0 ? axes[k] + rank : axes[k];
    if (axis < 0 || axis >= rank || k >= starts.size() || k >= ends.size()) {
      throw Error(where_ + ": axes " + IntsText(axes) + " with starts " + IntsText(starts) +
                  " and ends " + IntsText(ends) + " do not describe a slice of a rank-" +
                  std::to_string(rank) + " tensor");
    }
    const int64_t n = extent[static_cast<size_t>(axis)];
    const int64_t b = std::clamp(starts[k] < 0 ? starts[k] + n : starts[k], int64_t{0}, n);
    const int64_t e = std::clamp(ends[k] < 0 ? ends[k] + n : ends[k], int64_t{0}, n);
    const int64_t step = k < steps.size() ? steps[k] : 1;
    if (b == 0 && e == n && step == 1) continue;  // the whole axis
    if (axis != channel_axis || step != 1) {
      throw Error(where_ + ": a slice of axis " + std::to_string(axis) + " [" + std::to_string(b) +
                  ", " + std::to_string(e) + ") step " + std::to_string(step) +
                  ": only slices of the channels (axis " + std::to_string(channel_axis) +
                  ") with step 1 are supported");
    }
    if (e <= b)
      throw Error(where_ + ": the channel slice [" + std::to_string(b) + ", " + std::to_string(e) +
                  ") is empty");
    begin = static_cast<int>(b);
    end = static_cast<int>(e);
  }
  Define(node, InLayoutOf(SliceChannels(x, begin, end), x));
}

//! Split along the channels into consecutive slices (ShuffleNet's chunk);
//! each output is the slice a reader reads, with no operator.
void Importer::ImportSplit(const ::onnx::NodeProto& node, const Attributes& attrs) {
  attrs.OnlyKnown({"axis", "split", "num_outputs"});
  const Value& x = MapInput(node, 0);
  const int64_t axis = attrs.Int("axis", 0);
  if (axis != 1 && axis != -3) {
    throw Error(where_ + ": axis=" + std::to_string(axis) +
                ": only a split of the channels (axis 1) is supported");
  }
  std::vector<int64_t> sizes =
      HasInput(node, 1) ? Ints(ConstInput(node, 1, "split")) : attrs.Ints("split");
  const int outputs = node.output_size();
  if (sizes.empty()) {  // equal parts, the last one smaller (opset 18)
    const int64_t part = (x.shape.c + outputs - 1) / outputs;
    for (int i = 0; i < outputs; ++i) {
      sizes.push_back(std::min<int64_t>(part, x.shape.c - part * i));
    }
  }
  int64_t total = 0;
  for (int64_t s : sizes) total += s;
  if (static_cast<int>(sizes.size()) != outputs || total != x.shape.c ||
      std::find_if(sizes.begin(), sizes.end(), [](int64_t s) { return s <= 0; }) != sizes.end()) {
    throw Error(where_ + ": split " + IntsText(sizes) + " into " + std::to_string(outputs) +
                " outputs does not cut " + std::to_string(x.shape.c) + " channels");
  }
  int begin = 0;
  for (int i = 0; i < outputs; ++i) {
    const int end = begin + static_cast<int>(sizes[static_cast<size_t>(i)]);
    DefineOutput(node.output(i), SliceChannels(x, begin, end));
    begin = end;
  }
}

//! Reshape (N, C, H, W) -> (N, g, C/g, H, W): the view a channel shuffle
//! starts from. Returns false when `shape` is not such a split.
bool Importer::GroupChannels(const ::onnx::NodeProto& node, const Value& x,
                             const std::vector<int64_t>& shape) {
  if (x.kind != Value::Kind::kTensor || shape.size() != 5) return false;
  const bool batch = shape[0] == batch_ || shape[0] == 0 || shape[0] == -1;
  const int64_t groups = shape[1], per_group = shape[2];
  if (!batch || shape[3] != x.shape.h || shape[4] != x.shape.w || groups < 1 || per_group < 1 ||
      groups * per_group != x.shape.c) {
    return false;
  }
  Value grouped = x;
  grouped.kind = Value::Kind::kGrouped;
  grouped.groups = static_cast<int>(groups);
  grouped.transposed = false;
  Define(node, grouped);
  return true;
}

//! Transpose: swapping the group axes of a grouped view (the middle of a
//! channel shuffle), or moving the channels last and back (ConvNeXt's
//! per-position layers): both only relabel the axes of the same data. Any
//! other transpose moves data between the channel and spatial axes, which
//! the IR does not represent.
void Importer::ImportTranspose(const ::onnx::NodeProto& node, const Attributes& attrs) {
  attrs.OnlyKnown({"perm"});
  const Value& x = Input(node, 0);
  const std::vector<int64_t> perm = attrs.Ints("perm");
  if (TransposeTokens(node, x, perm) || TransposeSampleWindows(node, x, perm)) return;
  if (x.kind == Value::Kind::kGrouped && perm == std::vector<int64_t>{0, 2, 1, 3, 4}) {
    Value swapped = x;
    swapped.transposed = !x.transposed;
    return Define(node, swapped);
  }
  const bool to_last = x.kind == Value::Kind::kTensor && x.tokens == Value::Tokens::kNone &&
                       perm == std::vector<int64_t>{0, 2, 3, 1};
  const bool back = x.kind == Value::Kind::kChannelsLast && x.tokens == Value::Tokens::kNone &&
                    x.window_stage == 0 && x.roll_y == 0 && x.roll_x == 0 &&
                    perm == std::vector<int64_t>{0, 3, 1, 2};
  if (to_last || back) {
    Value relabelled = x;
    relabelled.kind = to_last ? Value::Kind::kChannelsLast : Value::Kind::kTensor;
    PassedOn(node);
    return Define(node, relabelled);
  }
  throw Error(where_ + ": a Transpose with perm " + IntsText(perm) + " of " + KindText(x) +
              ": only moving the channels last (perm [0, 2, 3, 1]) and back (perm [0, 3, 1, 2]), "
              "or swapping the two channel-group axes of a channel shuffle (a Reshape to "
              "[N, g, C/g, H, W], perm [0, 2, 1, 3, 4], a Reshape back) is supported");
}

//! The Reshape that ends a channel shuffle: back to (N, C, H, W). With the
//! group axes swapped it is channel_shuffle(groups); without, nothing.
bool Importer::UngroupChannels(const ::onnx::NodeProto& node, const Value& x,
                               const std::vector<int64_t>& shape) {
  if (x.kind != Value::Kind::kGrouped) return false;
  const bool batch = shape.size() == 4 && (shape[0] == batch_ || shape[0] == 0 || shape[0] == -1);
  if (!batch || (shape[1] != x.shape.c && shape[1] != -1) || shape[2] != x.shape.h ||
      shape[3] != x.shape.w) {
    throw Error(where_ + ": a Reshape of " + KindText(x) + " to " + IntsText(shape) +
                ": only a Reshape back to [N, " + std::to_string(x.shape.c) + ", " +
                std::to_string(x.shape.h) + ", " + std::to_string(x.shape.w) +
                "] (ending a channel shuffle) is supported");
  }
  Value whole = x;
  whole.kind = Value::Kind::kTensor;
  if (!x.transposed) return Define(node, whole), true;
  OpParams shuffle = MakeRegisteredOp(RegisteredKind::kChannelShuffle);
  SetAttribute(shuffle.registered, "groups", x.groups, where_);
  Define(node, AddNode(shuffle, x.terms, TermShapes(x.terms), "ChannelShuffle"));
  return true;
}

}  // namespace ios::onnx_import::detail
