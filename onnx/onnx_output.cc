// The end of an import: the graph's outputs (one, or several written in
// turn as one vector per sample, and TensorFlow's output heads reshaped to
// [N, anchors, k]) and the finished model, with only the operators the
// outputs depend on.
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "common/blocks.h"
#include "common/error.h"
#include "common/op_kinds.h"
#include "common/printable.h"
#include "onnx/importer.h"

namespace ios::onnx_import::detail {

//! TensorFlow's output heads: a map, channels-last after its Transpose,
//! reshaped to [N, anchors, k] and read by nothing but the graph's outputs
//! is that many values per sample in the map's order (FinishOutput writes
//! it as one vector). Elsewhere such a Reshape is refused: what reads
//! [N, anchors, k] would need its own axes.
bool Importer::OutputReshape(const ::onnx::NodeProto& node, const Value& x,
                             const ConstTensor& shape) {
  if ((x.kind != Value::Kind::kTensor && x.kind != Value::Kind::kChannelsLast) ||
      !shape.has_values || shape.is_float || shape.ints.size() < 2 ||
      !OnlyAGraphOutput(node.output(0))) {
    return false;
  }
  const int64_t first = shape.ints[0];
  if (first != 0 && first != -1 && first != batch_) return false;
  const int64_t features = int64_t{x.shape.c} * x.shape.h * x.shape.w;
  std::vector<int64_t> dims(shape.ints.begin() + 1, shape.ints.end());
  int64_t known = 1;
  int unknown = -1;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] == -1 && unknown < 0 && first != -1) {
      unknown = static_cast<int>(i);
    } else if (dims[i] < 1) {
      return false;
    } else {
      known *= dims[i];
    }
  }
  if (unknown >= 0 && known > 0 && features % known == 0) dims[unknown] = features / known;
  if (unknown < 0 && known != features) return false;
  Value flat = x;
  flat.kind = Value::Kind::kFlat;
  flat.flat_channels_last = x.kind == Value::Kind::kChannelsLast;
  flat.flat_dims = std::move(dims);
  Define(node, flat);
  return true;
}

void Importer::FinishOutput() {
  const ::onnx::GraphProto& g = model_.graph();
  if (g.output_size() < 1) throw Error(source_ + ": the graph has no output");
  Inputs terms;
  for (const ::onnx::ValueInfoProto& output : g.output()) {
    where_ = source_ + ": graph output " + Quoted(output.name());
    const auto it = values_.find(output.name());
    if (it == values_.end()) throw Error(where_ + ": no node produces it");
    const Value& out = it->second;
    if (out.kind == Value::Kind::kConstant || out.kind == Value::Kind::kPadded ||
        out.kind == Value::Kind::kZeroExtended) {
      throw Error(where_ + ": is " + KindText(out) + ", not a computed feature map");
    }
    if (out.kind == Value::Kind::kGrouped && out.transposed) {
      throw Error(where_ + ": is " + KindText(out) +
                  "; an output in another order than (N, C, H, W) or (N, H, W, C) is not "
                  "supported");
    }
    ModelOutput described{output.name(),
                          {},
                          int64_t{out.shape.c} * out.shape.h * out.shape.w,
                          out.kind == Value::Kind::kChannelsLast || out.flat_channels_last};
    for (const auto& d : output.type().tensor_type().shape().dim()) {
      described.dims.push_back(d.has_dim_value() ? d.dim_value() : -1);
    }
    outputs_.push_back(std::move(described));
    for (Term& term : OutputTerms(out, g.output_size() == 1)) terms.push_back(std::move(term));
  }
  // One output that is a whole operator's is the graph's sink as it is.
  if (terms.size() == 1 && terms[0].size() == 1) {
    const Slice& s = terms[0][0];
    if (s.begin == 0 && s.end == pending_.at(s.producer).node.output.c && s.producer != 0) {
      sink_ = s.producer;
      return;
    }
  }
  label_ = g.output_size() == 1 ? "output" : "outputs";
  OpParams op;
  op.kind = OpKind::kIdentity;
  AddNode(op, terms, TermShapes(terms), g.output_size() == 1 ? "Output" : "Outputs");
  sink_ = static_cast<NodeId>(pending_.size()) - 1;
}

Inputs Importer::OutputTerms(const Value& out, bool alone) {
  const bool pixels = int64_t{out.shape.h} * out.shape.w > 1;
  const bool channels_last = out.kind == Value::Kind::kChannelsLast || out.flat_channels_last;
  // In (N, C, H, W) order, or a vector already: ios-run writes it as it is.
  if ((alone && !channels_last) || !pixels) return out.terms;
  label_ = "flatten of " + Quoted(outputs_.back().name);
  OpParams op = MakeRegisteredOp(RegisteredKind::kFlatten);
  SetAttribute(op.registered, "channels_last", channels_last ? 1 : 0, where_);
  const Value flat = AddNode(op, out.terms, TermShapes(out.terms), "Flatten");
  return flat.terms;
}

bool Importer::OnlyAGraphOutput(const std::string& name) const {
  int outputs = 0;
  for (const auto& output : model_.graph().output()) outputs += output.name() == name ? 1 : 0;
  const auto it = readers_.find(name);
  return outputs > 0 && it != readers_.end() && it->second == outputs;
}

//! Keeps the operators the output depends on, renumbered in order.
ImportedModel Importer::Assemble() {
  std::vector<bool> live(pending_.size(), false);
  live[sink_] = true;
  live[0] = true;
  for (NodeId id = sink_; id > 0; --id) {
    if (!live[id]) continue;
    for (const Term& term : pending_[id].node.inputs) {
      for (const Slice& s : term) live[s.producer] = true;
    }
  }
  ImportedModel model;
  std::vector<NodeId> renumbered(pending_.size(), -1);
  int dropped = 0;
  bool all_weights = true;
  for (size_t id = 0; id < pending_.size(); ++id) {
    if (!live[id]) {
      dropped += pending_[id].folded_forward ? 0 : 1;
      continue;
    }
    renumbered[id] = static_cast<NodeId>(model.graph.nodes.size());
    Node node = pending_[id].node;
    for (Term& term : node.inputs) {
      for (Slice& s : term) s.producer = renumbered[s.producer];
    }
    if (exec::CarriesWeights(node.op)) all_weights = all_weights && pending_[id].has_weights;
    model.graph.nodes.push_back(std::move(node));
  }
  if (dropped > 0) {
    Note(std::to_string(dropped) + " operator(s) the output does not depend on were dropped");
  }
  if (all_weights) {
    for (size_t id = 0; id < pending_.size(); ++id) {
      if (renumbered[id] < 0 || !exec::CarriesWeights(pending_[id].node.op)) continue;
      model.weights.Set({renumbered[id], 0}, std::move(pending_[id].weights));
    }
  }
  model.has_weights = all_weights;
  std::string name = model_.graph().name();
  if (name.empty() || name == "torch_jit" || name == "main_graph" || name == "tf2onnx") {
    name = std::filesystem::path(source_).stem().string();
  }
  model.graph.name = name;
  SetAutomaticBlocks(model.graph);
  InferShapes(model.graph);
  CheckSingleSinkBlocks(model.graph);
  model.batch = batch_;
  model.input_channels_last = input_channels_last_;
  model.outputs = std::move(outputs_);
  model.notes = std::move(notes_);
  return model;
}

}  // namespace ios::onnx_import::detail
