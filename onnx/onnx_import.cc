// Importing an ONNX model: parsing (the file mapped, its weights kept out
// of protobuf: onnx_wire.h, onnx_external.h), the ONNX checker and shape
// inference, the initializers' values read on several threads, then the
// model-level half of the Importer (onnx/importer.h): opset,
// inputs, constants, the values ONNX names stand for, the graph under
// construction, the output and the finished, block-annotated model. What
// each operator becomes is in onnx_operators.cc and onnx_combine.cc.
#include "onnx/onnx_import.h"

#include <onnx/checker.h>
#include <onnx/onnx_pb.h>
#include <onnx/shape_inference/implementation.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <deque>
#include <exception>
#include <filesystem>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <thread>
#include <utility>
#include <vector>

#include "common/error.h"
#include "common/input_file.h"
#include "common/op_kinds.h"
#include "common/printable.h"
#include "common/process_cpus.h"
#include "onnx/importer.h"
#include "onnx/onnx_chains.h"
#include "onnx/onnx_external.h"
#include "onnx/onnx_tensors.h"
#include "onnx/onnx_wire.h"

namespace ios::onnx_import {
namespace {

std::string Lower(std::string text) {
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

//! At most this many threads copy the initializers out of the file.
constexpr unsigned kMaxReaderThreads = 4;

//! Every initializer of `graph` read (ReadTensor; `raw` as the Importer's),
//! on up to kMaxReaderThreads threads: copying hundreds of MB of weights
//! out of the file is most of a large model's import, and the tensors are
//! independent. The first error, by initializer order, is rethrown.
std::vector<detail::ConstTensor> ReadInitializers(
    const ::onnx::GraphProto& graph, const std::vector<std::optional<std::string_view>>& raw,
    const std::string& source) {
  const auto count = static_cast<size_t>(graph.initializer_size());
  std::vector<detail::ConstTensor> tensors(count);
  std::vector<std::exception_ptr> errors(count);
  const auto read = [&](size_t first, size_t step) {
    for (size_t i = first; i < count; i += step) {
      try {
        const ::onnx::TensorProto& t = graph.initializer(static_cast<int>(i));
        tensors[i] = detail::ReadTensor(t, source + ": initializer " + Quoted(t.name()),
                                        i < raw.size() ? raw[i] : std::nullopt);
      } catch (...) {
        errors[i] = std::current_exception();
      }
    }
  };
  // The CPUs this process may run on (a taskset or cgroup), not the machine's.
  const unsigned threads =
      std::clamp(static_cast<unsigned>(ProcessCpus().size()), 1u, kMaxReaderThreads);
  {
    std::vector<std::jthread> helpers;
    for (unsigned t = 1; t < threads; ++t) helpers.emplace_back(read, t, threads);
    read(0, threads);
  }  // joined
  for (const std::exception_ptr& error : errors) {
    if (error) std::rethrow_exception(error);
  }
  return tensors;
}

}  // namespace

namespace detail {

ImportedModel Importer::Run() {
  const ::onnx::GraphProto& g = model_.graph();
  CheckOpset();
  for (const auto& info : g.value_info()) inferred_[info.name()] = &info.type();
  for (const auto& info : g.output()) inferred_[info.name()] = &info.type();
  for (ConstTensor& initializer : initializers_) AddConstant(std::move(initializer));
  initializers_.clear();
  CountReaders();
  {
    // Formulas are recognised before any node is imported (onnx_chains.h).
    const NodeChains chains(model_.graph(), values_, readers_);
    FindGelus(chains);
    FindLayerNorms(chains);
    FindAttentions(chains);
    FindWindowAttentions(chains);
    FindSampleWindowAttentions(chains);
  }
  AddInputs();
  for (int i = 0; i < g.node_size(); ++i) ImportNode(g.node(i), i);
  if (folded_ > 0) {
    Note(std::to_string(folded_) +
         " node(s) computing shapes and indices (Shape, Gather, ...) were folded into constants");
  }
  FinishOutput();
  return Assemble();
}

void Importer::CheckOpset() {
  for (const auto& opset : model_.opset_import()) {
    if (opset.domain().empty() || opset.domain() == "ai.onnx") opset_ = opset.version();
  }
  if (opset_ < 7) {
    throw Error(source_ + ": opset " + std::to_string(opset_) +
                " of the default domain; this importer reads opset 7 and newer");
  }
}

void Importer::CountReaders() {
  const ::onnx::GraphProto& g = model_.graph();
  for (const auto& node : g.node()) {
    for (const std::string& input : node.input()) {
      if (!input.empty()) ++readers_[input];
    }
  }
  for (const auto& output : g.output()) ++readers_[output.name()];
}

//! The one feature-map input (N,C,H,W float); other inputs without an
//! initializer are weights whose values the file does not carry.
void Importer::AddInputs() {
  const ::onnx::GraphProto& g = model_.graph();
  for (const ::onnx::ValueInfoProto& input : g.input()) {
    if (values_.count(input.name())) continue;  // an initializer listed as input too
    const std::string where = source_ + ": graph input " + Quoted(input.name());
    if (!input.type().has_tensor_type()) throw Error(where + ": not a tensor");
    const auto& type = input.type().tensor_type();
    std::vector<int64_t> dims;
    bool symbolic = false;
    for (const auto& d : type.shape().dim()) {
      symbolic |= !d.has_dim_value();
      dims.push_back(d.has_dim_value() ? d.dim_value() : -1);
    }
    if (have_input_) {
      // A parameter exported without its values (export_params=False).
      if (symbolic) throw Error(where + ": a second input with a symbolic shape");
      ConstTensor& weight = held_.emplace_back();
      weight.name = input.name();
      weight.dims = dims;
      ElementCount(dims, where);
      weight.has_values = false;
      values_[input.name()] = {Value::Kind::kConstant, {}, {}, {0, 0}, &weight, where};
      continue;
    }
    if (type.elem_type() != ::onnx::TensorProto_DataType_FLOAT || dims.size() != 4) {
      throw Error(where +
                  ": the network input must be a float tensor of rank 4 (N,C,H,W, or "
                  "N,H,W,C read only by a Transpose to N,C,H,W)");
    }
    int extents[4] = {1, 1, 1, 1};
    for (size_t i = 1; i < 4; ++i) {
      if (dims[i] < 1) {
        throw Error(where + ": dimension " + std::to_string(i) +
                    " must be a fixed positive size (only the batch may be symbolic)");
      }
      extents[i] = Narrow(dims[i], kExtentBounds, where, "dimension " + std::to_string(i));
    }
    // A batch of 0 or less reads as symbolic, as it always has.
    fixed_batch_ = dims[0] > 0;
    batch_ = fixed_batch_ ? Narrow(dims[0], kBatchBounds, where, "the batch (dimension 0)") : 1;
    // Converters from TensorFlow keep its N,H,W,C input and transpose it
    // first thing: the IR's input is then the transposed map, and the file
    // a user runs on is read as N,H,W,C (ImportedModel::input_channels_last).
    input_channels_last_ = ReadOnlyByTransposesToChannelsFirst(input.name());
    Pending& in = pending_.emplace_back();
    in.node.name = UniqueName(input.name().empty() ? "input" : input.name());
    in.node.op.kind = OpKind::kInput;
    in.node.output = input_channels_last_ ? Shape{extents[3], extents[1], extents[2]}
                                          : Shape{extents[1], extents[2], extents[3]};
    values_[input.name()] = {
        input_channels_last_ ? Value::Kind::kChannelsLast : Value::Kind::kTensor,
        {{{0, 0, in.node.output.c}}},
        in.node.output,
        {0, 0},
        nullptr,
        where};
    have_input_ = true;
  }
  if (!have_input_) throw Error(source_ + ": the graph has no input without values");
}

bool Importer::ReadOnlyByTransposesToChannelsFirst(const std::string& name) const {
  int transposes = 0;
  for (const ::onnx::NodeProto& node : model_.graph().node()) {
    for (const std::string& input : node.input()) {
      if (input != name) continue;
      bool to_channels_first = false;
      if (node.op_type() == "Transpose") {
        for (const ::onnx::AttributeProto& a : node.attribute()) {
          if (a.name() == "perm") {
            to_channels_first = std::vector<int64_t>(a.ints().begin(), a.ints().end()) ==
                                std::vector<int64_t>{0, 3, 1, 2};
          }
        }
      }
      if (!to_channels_first) return false;
      ++transposes;
    }
  }
  return transposes > 0;
}

void Importer::AddConstant(ConstTensor tensor) {
  ConstTensor& held = held_.emplace_back(std::move(tensor));
  values_[held.name] = {Value::Kind::kConstant, {}, {}, {0, 0}, &held, "initializer"};
}

const Value& Importer::Input(const ::onnx::NodeProto& node, int i) const {
  if (i >= node.input_size() || node.input(i).empty()) {
    throw Error(where_ + ": input " + std::to_string(i) + " is missing");
  }
  const auto it = values_.find(node.input(i));
  if (it == values_.end()) {
    throw Error(where_ + ": input " + Quoted(node.input(i)) +
                " is produced by no earlier node and is no graph input or initializer");
  }
  return it->second;
}

bool Importer::HasInput(const ::onnx::NodeProto& node, int i) const {
  return i < node.input_size() && !node.input(i).empty();
}

//! A feature map input (not flattened, not padded).
const Value& Importer::MapInput(const ::onnx::NodeProto& node, int i) const {
  const Value& v = Input(node, i);
  // A partitioned or rolled view is not the map a Conv or a pool reads.
  if (v.kind == Value::Kind::kTensor && v.window_stage == 0 && v.roll_y == 0 && v.roll_x == 0) {
    return v;
  }
  // A channels-last view is read only by what works on it (docs/onnx.md).
  const std::string only = v.kind == Value::Kind::kChannelsLast
                               ? " (only per-position operators, a LayerNorm or MatMul over its "
                                 "channels, a Softmax over them or a Transpose back read one)"
                               : "";
  throw Error(where_ + ": input " + Quoted(node.input(i)) + " is " + KindText(v) + only +
              "; a feature map (N,C,H,W) is expected here");
}

const ConstTensor& Importer::ConstInput(const ::onnx::NodeProto& node, int i,
                                        const std::string& role) {
  const Value& v = Input(node, i);
  if (v.kind != Value::Kind::kConstant) {
    throw Error(where_ + ": its " + role + " (" + Quoted(node.input(i)) + ") is " + KindText(v) +
                "; only constant " + role + "s are supported");
  }
  if (v.constant->taken) {
    throw Error(where_ + ": " + Quoted(node.input(i)) +
                " was read again after its only reader took its values (an importer bug)");
  }
  return *v.constant;
}

std::vector<float> Importer::TakeFloats(const ::onnx::NodeProto& node, int i) {
  const ConstTensor& w = ConstInput(node, i, "weight");
  if (!ReadOnlyBy(node.input(i), 1)) return Copied(w.floats);
  // held_ owns every constant a Value points to, so it may give it up.
  const auto held =
      std::find_if(held_.begin(), held_.end(), [&](const ConstTensor& t) { return &t == &w; });
  if (held == held_.end()) return Copied(w.floats);
  held->taken = true;
  return std::move(held->floats);
}

std::string Importer::KindText(const Value& v) {
  switch (v.kind) {
    case Value::Kind::kTensor:
      return v.tokens == Value::Tokens::kChannelsFirst ? "a feature map as tokens (N, C, L)"
                                                       : "a feature map";
    case Value::Kind::kFlat:
      return "a flattened feature map";
    case Value::Kind::kPadded:
      return "the output of " + v.made_by + ", which only a Conv or an AveragePool may read";
    case Value::Kind::kConstant:
      return "a constant";
    case Value::Kind::kGrouped:
      return "a feature map viewed as channel groups (the middle of a channel shuffle)";
    case Value::Kind::kZeroExtended:
      return "a feature map with zero channels appended (a Concat with zeros), which only an Add "
             "may read";
    case Value::Kind::kChannelsLast:
      switch (v.tokens) {
        case Value::Tokens::kBatchFirst:
          return "tokens (N, L, C)";
        case Value::Tokens::kBatchSecond:
          return "tokens (L, N, C)";
        case Value::Tokens::kRows:
          return "tokens as rows (L*N, C)";
        default:
          return "a feature map transposed to channels-last (N, H, W, C)";
      }
    case Value::Kind::kWithClassToken:
      return "tokens with a class token first, which only the Add of a position embedding may "
             "read";
    case Value::Kind::kRollPart:
      return "rows or columns of a channels-last map (half of a roll), which only the Concat "
             "of both halves may read";
    case Value::Kind::kStridedPhase:
      return "every " + std::to_string(v.phase_step) +
             "th row and column of a channels-last map, which only the Concat of all such "
             "phases (Swin's patch merging) may read";
  }
  return "?";
}

void Importer::Define(const ::onnx::NodeProto& node, Value value) {
  if (node.output_size() < 1 || node.output(0).empty()) {
    throw Error(where_ + ": has no output");
  }
  for (int i = 1; i < node.output_size(); ++i) {
    if (!node.output(i).empty() && readers_.count(node.output(i))) {
      throw Error(where_ + ": its output " + std::to_string(i) + " (" + Quoted(node.output(i)) +
                  ") is read, but only the first output is imported");
    }
  }
  DefineOutput(node.output(0), std::move(value));
}

void Importer::DefineOutput(const std::string& name, Value value) {
  if (values_.count(name)) throw Error(where_ + ": output " + Quoted(name) + " is defined twice");
  CheckInferredShape(name, value);
  value.made_by = where_;
  values_[name] = std::move(value);
}

void Importer::CheckInferredShape(const std::string& name, const Value& value) const {
  const auto it = inferred_.find(name);
  if (value.kind == Value::Kind::kConstant || it == inferred_.end() ||
      !it->second->has_tensor_type() || !it->second->tensor_type().has_shape()) {
    return;
  }
  const ::onnx::TensorShapeProto& theirs = it->second->tensor_type().shape();
  const std::vector<int64_t> ours =
      OnnxDims(value, fixed_batch_ ? batch_ : -1);  // -1: the symbolic batch
  bool same = theirs.dim_size() == static_cast<int>(ours.size());
  for (int i = 0; same && i < theirs.dim_size(); ++i) {
    same = !theirs.dim(i).has_dim_value() || ours[i] < 0 || theirs.dim(i).dim_value() == ours[i];
  }
  if (same) return;
  std::string ours_text, theirs_text;
  for (int64_t d : ours)
    ours_text += (ours_text.empty() ? "" : ", ") + (d < 0 ? "N" : std::to_string(d));
  for (const auto& d : theirs.dim()) {
    std::string dim = d.has_dim_value() ? std::to_string(d.dim_value()) : d.dim_param();
    theirs_text += (theirs_text.empty() ? "" : ", ") + (dim.empty() ? "?" : dim);
  }
  throw Error(where_ + ": its output " + Quoted(name) + " is [" + ours_text +
              "] as imported but [" + theirs_text +
              "] by ONNX's shape inference; refused rather than import another network");
}

std::string Importer::UniqueName(std::string name) {
  if (names_.insert(name).second) return name;
  for (int k = 2;; ++k) {
    const std::string candidate = name + "_" + std::to_string(k);
    if (names_.insert(candidate).second) return candidate;
  }
}

//! Appends an IR operator reading `inputs`; returns its feature map.
Value Importer::AddNode(OpParams op, const Inputs& inputs, const std::vector<Shape>& term_shapes,
                        std::string hint, exec::ConvWeights weights, bool has_weights) {
  Pending& p = pending_.emplace_back();
  p.node.name = UniqueName(label_);
  p.node.hint = std::move(hint);
  p.node.op = std::move(op);
  p.node.inputs = inputs;
  p.node.output = InferOpOutput(p.node.op, term_shapes, where_);
  p.weights = std::move(weights);
  p.has_weights = has_weights;
  const NodeId id = static_cast<NodeId>(pending_.size()) - 1;
  return {Value::Kind::kTensor, {{{id, 0, p.node.output.c}}}, p.node.output, {0, 0}, nullptr, {}};
}

std::vector<Shape> Importer::TermShapes(const Inputs& inputs) const {
  std::vector<Shape> shapes;
  for (const Term& term : inputs) {
    const Slice& s = term.at(0);
    Shape shape = pending_.at(s.producer).node.output;
    shape.c = s.channels();
    shapes.push_back(shape);
  }
  return shapes;
}

//! The one IR operator a feature map is the whole output of, when the
//! ONNX tensor is read by nothing but `node` (so the operator may be
//! rewritten in place: a Dropout or Identity between them passes its one
//! reader on, and a second reader anywhere shows in the count).
//! `v` is the node's input `input` (0 unless said).
Pending* Importer::SoleProducer(const ::onnx::NodeProto& node, const Value& v, int input) {
  if (v.terms.size() != 1 || v.terms[0].size() != 1) return nullptr;
  const Slice& s = v.terms[0][0];
  Pending& p = pending_.at(s.producer);
  if (s.begin != 0 || s.end != p.node.output.c) return nullptr;
  return ReadOnlyBy(node.input(input), 1) ? &p : nullptr;
}

bool Importer::ReadOnlyBy(const std::string& name, int reads) const {
  const auto readers = readers_.find(name);
  if (readers == readers_.end() || readers->second != reads) return false;
  for (auto from = passed_on_.find(name); from != passed_on_.end();
       from = passed_on_.find(from->second)) {
    const auto before = readers_.find(from->second);
    if (before == readers_.end() || before->second != 1) return false;
  }
  return true;
}

void Importer::PassedOn(const ::onnx::NodeProto& node, int input) {
  if (node.output_size() > 0 && input < node.input_size()) {
    passed_on_[node.output(0)] = node.input(input);
  }
}

Pads Importer::SidePads(const std::vector<int64_t>& pads, const std::string& attr) const {
  if (pads.empty()) return {};
  if (pads.size() != 4) {
    throw Error(where_ + ": attribute " + Quoted(attr) + " has " + std::to_string(pads.size()) +
                " values; 4 (top, left, bottom, right) expected for a 2-D operator");
  }
  int p[4];
  for (int i = 0; i < 4; ++i)
    p[i] = Narrow(pads[i], kPaddingBounds, where_, "attribute " + Quoted(attr));
  if (p[2] < p[0] || p[3] < p[1]) {
    throw Error(where_ + ": padding " + Quoted(attr) + " " + IntsText(pads) +
                " (top, left, bottom, right) pads the top or left more than the bottom or right: "
                "only equal padding, or more at the bottom and right, is supported");
  }
  return {{p[0], p[1]}, {p[2] - p[0], p[3] - p[1]}};
}

Window Importer::Pair(const Attributes& attrs, const std::string& attr, int fallback) const {
  const std::vector<int> values = attrs.Ints(attr, kExtentBounds);
  if (values.empty()) return {fallback, fallback};
  if (values.size() != 2) {
    throw Error(where_ + ": attribute " + Quoted(attr) + " has " + std::to_string(values.size()) +
                " values; 2 expected for a 2-D operator");
  }
  return {values[0], values[1]};
}

//! Padding from auto_pad (or the explicit pads when NOTSET).
Pads Importer::Padding(const Attributes& attrs, const Shape& in, Window kernel, Window stride,
                       Window dilation) const {
  const std::string mode = attrs.String("auto_pad", "NOTSET");
  if (mode == "NOTSET") return SidePads(attrs.Ints("pads"), "pads");
  if (!attrs.Ints("pads").empty()) {
    throw Error(where_ + ": both auto_pad=" + mode + " and pads are given");
  }
  if (mode == "VALID") return {};
  if (mode != "SAME_UPPER" && mode != "SAME_LOWER") {
    throw Error(where_ + ": auto_pad " + Quoted(mode) +
                "; NOTSET, SAME_UPPER, SAME_LOWER or VALID expected");
  }
  // In int64: each factor is at most kMaxExtent, a product of two is not.
  // An odd total puts the one extra row at the end (SAME_UPPER), which the
  // IR represents, or at the start (SAME_LOWER), which it does not.
  Pads pads;
  const auto same = [&](int64_t size, int64_t k, int64_t s, int64_t d, const char* axis, int& begin,
                        int& extra) {
    const int64_t out = (size + s - 1) / s;
    const int64_t total = std::max<int64_t>((out - 1) * s + (k - 1) * d + 1 - size, 0);
    if (total % 2 != 0 && mode == "SAME_LOWER") {
      throw Error(where_ + ": auto_pad=SAME_LOWER pads the " + axis + " axis by " +
                  std::to_string(total) +
                  " in all, more at the start: only equal padding, or more at the end, is "
                  "supported");
    }
    begin = Narrow(total / 2, kPaddingBounds, where_,
                   "the padding auto_pad=" + mode + " makes of the " + axis + " axis");
    extra = static_cast<int>(total % 2);
  };
  same(in.h, kernel.h, stride.h, dilation.h, "height", pads.begin.h, pads.end_extra.h);
  same(in.w, kernel.w, stride.w, dilation.w, "width", pads.begin.w, pads.end_extra.w);
  return pads;
}

}  // namespace detail

bool IsOnnxPath(std::string_view path) {
  return path.size() > 5 && Lower(std::string(path.substr(path.size() - 5))) == ".onnx";
}

namespace {

::onnx::ModelProto Parse(std::string_view bytes, const std::string& source) {
  ::onnx::ModelProto model;
  if (bytes.size() > static_cast<size_t>(std::numeric_limits<int>::max()) ||
      !model.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    throw Error(source +
                ": not an ONNX model (the protobuf does not parse: truncated or another "
                "kind of file)");
  }
  return model;
}

//! A model parsed, checked and shape-inferred, with every initializer's
//! values read: all the import needs of the file's bytes.
struct ReadModel {
  ::onnx::ModelProto model;
  std::vector<detail::ConstTensor> initializers;
  std::vector<std::string> warnings;  // checker complaints that were not fatal
};

//! Checks `read.model`, infers its shapes and reads its initializers; `raw`
//! by initializer, the bytes of those whose values are not in the model.
void CheckAndRead(ReadModel& read, const std::string& source,
                  const std::vector<std::optional<std::string_view>>& raw) {
  ::onnx::ModelProto& model = read.model;
  if (!model.has_graph()) throw Error(source + ": an ONNX model without a graph");
  std::vector<std::string>& warnings = read.warnings;
  try {
    ::onnx::checker::check_model(model);
  } catch (const std::exception& e) {
    const std::string what = e.what();
    // ONNX 1.12 knows IR <= 8 and opset <= 17: a newer exporter's file is
    // still read, with the checker's complaint as a warning.
    if (what.find("ir_version") != std::string::npos || what.find("opset") != std::string::npos) {
      warnings.push_back("ONNX checker: " + what);
    } else {
      std::string line = what.substr(0, what.find('\n'));
      throw Error(source + ": the ONNX checker refuses it: " + line);
    }
  }
  // Before ONNX's inference, which divides by a zero stride.
  detail::CheckAttributesBeforeInference(model.graph(), source);
  try {
    ::onnx::shape_inference::InferShapes(model);
  } catch (const std::exception& e) {
    const std::string what = e.what();
    throw Error(source + ": ONNX shape inference fails: " + what.substr(0, what.find('\n')));
  }
  read.initializers = ReadInitializers(model.graph(), raw, source);
  // The values are held now: the model's bytes of them go (a clear alone
  // would keep the string's capacity), so that they are in memory once.
  for (::onnx::TensorProto& t : *model.mutable_graph()->mutable_initializer()) {
    if (t.has_raw_data()) std::string().swap(*t.mutable_raw_data());
  }
}

//! Parses `bytes`, with the weights kept out of protobuf (onnx_wire.h) and
//! external data read from `external`, then CheckAndRead. Nothing returned
//! refers to `bytes` or to `external`'s files.
ReadModel ReadBytes(std::string_view bytes, const std::string& source,
                    detail::ExternalData& external) {
  detail::SplitModel split = detail::SplitOutWeights(bytes);
  ReadModel read;
  read.model = Parse(split.skeleton.empty() ? bytes : split.skeleton, source);
  ::onnx::ModelProto& model = read.model;
  std::string().swap(split.skeleton);
  if (!split.raw.empty() &&
      split.raw.size() != static_cast<size_t>(model.graph().initializer_size())) {
    throw Error(source + ": " + std::to_string(model.graph().initializer_size()) +
                " initializers parsed but " + std::to_string(split.raw.size()) +
                " found in the file's bytes (a bug in onnx_wire.cc)");
  }
  // Before the checker, which would look for the files in the working
  // directory.
  external.TakeInitializers(model, source, split.raw);
  CheckAndRead(read, source, split.raw);
  return read;
}

ImportedModel ImportRead(ReadModel read, const std::string& source) {
  ImportedModel imported = detail::Importer(read.model, source, std::move(read.initializers)).Run();
  imported.warnings = std::move(read.warnings);
  return imported;
}

}  // namespace

ImportedModel ImportOnnx(std::string_view bytes, const std::string& source) {
  detail::ExternalData none(std::nullopt);
  return ImportRead(ReadBytes(bytes, source, none), source);
}

ImportedModel ImportOnnxFile(const std::string& path) {
  ReadModel read;
  {
    // Mapped, not read, and unmapped once the weights are copied out: they
    // are in memory once at a time, not as the file's pages and ours.
    const MappedInputFile file(path, "model", kMaxOnnxFileBytes);
    detail::ExternalData external(std::filesystem::path(path).parent_path().string());
    read = ReadBytes(file.bytes(), path, external);
  }
  return ImportRead(std::move(read), path);
}

}  // namespace ios::onnx_import
