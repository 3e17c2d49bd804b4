#include "common/graph.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <sstream>
#include <unordered_map>
#include <utility>

#include "common/activation.h"
#include "common/error.h"
#include "common/limits.h"
#include "common/op_kinds.h"
#include "common/printable.h"
#include "common/slices.h"

namespace ios {

std::vector<NodeId> Block::Operators() const {
  std::vector<NodeId> ops = inner;
  ops.push_back(exit);
  return ops;
}

std::vector<NodeId> DistinctProducers(const Node& node) {
  std::vector<NodeId> producers;
  for (const Term& term : node.inputs) {
    for (const Slice& slice : term) producers.push_back(slice.producer);
  }
  std::sort(producers.begin(), producers.end());
  producers.erase(std::unique(producers.begin(), producers.end()), producers.end());
  return producers;
}

std::optional<NodeId> Graph::Find(const std::string& node_name) const {
  for (NodeId id = 0; id < static_cast<NodeId>(nodes.size()); ++id) {
    if (nodes[id].name == node_name) return id;
  }
  return std::nullopt;
}

const char* ToString(OpKind kind) {
  switch (kind) {
    case OpKind::kInput:
      return "input";
    case OpKind::kConv:
      return "conv";
    case OpKind::kPool:
      return "pool";
    case OpKind::kActivation:
      return "activation";
    case OpKind::kEltwise:
      return "eltwise";
    case OpKind::kIdentity:
      return "identity";
    case OpKind::kSequential:
      return "sequential";
    case OpKind::kRegistered:
      return "registered";
  }
  return "?";
}

std::string KindName(const OpParams& op) {
  return op.kind == OpKind::kRegistered ? std::string(SpecOf(op.registered.kind).name)
                                        : ToString(op.kind);
}

const char* ToString(Activation act) { return KindOf(act).name.data(); }

const char* ToString(PoolType type) {
  switch (type) {
    case PoolType::kMax:
      return "max";
    case PoolType::kAvg:
      return "avg";
    case PoolType::kGlobalMax:
      return "global_max";
    case PoolType::kGlobalAvg:
      return "global_avg";
  }
  return "?";
}

std::string ShapeText(const Shape& s) {
  return std::to_string(s.c) + "x" + std::to_string(s.h) + "x" + std::to_string(s.w);
}

namespace {

// Output extent of a sliding window, in 64 bits so that no parameter an
// `int` holds can overflow it; throws naming the field to blame when the
// output would be empty or not fit an `int`.
// `end_extra` pads the end (bottom or right) beyond `pad`.
int WindowOutput(int in, int kernel, int stride, int pad, int dilation, const std::string& where,
                 const char* axis, int end_extra = 0) {
  if (kernel < 1 || stride < 1 || pad < 0 || dilation < 1) {
    throw Error(where + ": kernel, stride and dilation must be >= 1 and padding >= 0 (" + axis +
                ")");
  }
  if (end_extra < 0) {
    throw Error(where + ": padding_end_extra: " + std::to_string(end_extra) + " (" + axis +
                ") must be >= 0");
  }
  const int64_t span = int64_t{dilation} * (kernel - 1) + 1;
  const int64_t padded = int64_t{in} + 2 * int64_t{pad} + end_extra;
  if (padded < span) {
    // Blame the dilation when the kernel alone would have fitted.
    const bool dilated = dilation > 1 && kernel <= padded;
    throw Error(where + ": " + (dilated ? "dilation" : "kernel") + ": kernel " +
                std::to_string(kernel) +
                (dilation > 1 ? " dilated by " + std::to_string(dilation) : std::string()) +
                " with stride " + std::to_string(stride) + " and padding " + std::to_string(pad) +
                " gives an empty " + axis + " output for input " + axis + " " + std::to_string(in));
  }
  const int64_t out = (padded - span) / stride + 1;
  if (out > std::numeric_limits<int>::max()) {
    throw Error(where + ": padding: " + std::to_string(pad) + " gives an output " + axis + " of " +
                std::to_string(out) + ", more than an int holds");
  }
  return static_cast<int>(out);
}

//! The output size of a pool rounding up (ceil_mode), as PyTorch and ONNX
//! define it: a last window that would start beyond the input and its left
//! padding is dropped.
int CeilPoolOutput(int in, int kernel, int stride, int pad, const std::string& where,
                   const char* axis) {
  const int floor_out = WindowOutput(in, kernel, stride, pad, 1, where, axis);
  const int64_t span = int64_t{in} + 2 * int64_t{pad} - kernel;
  int64_t out = (span + stride - 1) / stride + 1;
  if ((out - 1) * stride >= int64_t{in} + pad) --out;
  return static_cast<int>(std::max<int64_t>(out, floor_out));
}

// Refuses a value no worker can measure (common/limits.h), naming the field.
void CheckLimit(int64_t value, int64_t limit, const std::string& where, const std::string& field,
                const std::string& what) {
  if (value > limit) {
    throw Error(where + ": " + field + ": " + what + std::to_string(value) +
                " exceeds the limit of " + std::to_string(limit) +
                " (the most a worker can measure, common/limits.h)");
  }
}

void CheckWindowLimits(const Window& kernel, const Window& stride, const Window& padding,
                       const Window& dilation, const std::string& where) {
  constexpr int64_t kMax = limits::kMaxExtent;
  for (const auto& [window, field] :
       {std::pair{&kernel, "kernel"}, std::pair{&stride, "stride"}, std::pair{&padding, "padding"},
        std::pair{&dilation, "dilation"}}) {
    CheckLimit(window->h, kMax, where, field, "height ");
    CheckLimit(window->w, kMax, where, field, "width ");
  }
  CheckLimit(int64_t{dilation.h} * (kernel.h - 1) + 1, kMax, where, "dilation",
             "dilated kernel height ");
  CheckLimit(int64_t{dilation.w} * (kernel.w - 1) + 1, kMax, where, "dilation",
             "dilated kernel width ");
}

// The parameters of `op` (and of its steps) against the worker limits.
void CheckOpLimits(const OpParams& op, const std::string& where) {
  constexpr int64_t kMax = limits::kMaxExtent;
  switch (op.kind) {
    case OpKind::kConv:
      CheckLimit(op.conv.out_channels, kMax, where, "out_channels", "");
      CheckLimit(op.conv.groups, kMax, where, "groups", "");
      CheckWindowLimits(op.conv.kernel, op.conv.stride, op.conv.padding, op.conv.dilation, where);
      CheckLimit(op.conv.padding_end_extra.h, kMax, where, "padding_end_extra", "height ");
      CheckLimit(op.conv.padding_end_extra.w, kMax, where, "padding_end_extra", "width ");
      break;
    case OpKind::kPool:
      if (op.pool.type == PoolType::kMax || op.pool.type == PoolType::kAvg) {
        CheckWindowLimits(op.pool.kernel, op.pool.stride, op.pool.padding, Window{}, where);
      }
      break;
    case OpKind::kSequential:
      CheckLimit(static_cast<int64_t>(op.chain.size()),
                 static_cast<int64_t>(limits::kMaxChainLength), where, "nodes",
                 "number of sequential steps ");
      for (size_t i = 0; i < op.chain.size(); ++i) {
        CheckOpLimits(op.chain[i], where + " (sequential step " + std::to_string(i) + ")");
      }
      break;
    case OpKind::kInput:
    case OpKind::kActivation:
    case OpKind::kEltwise:
    case OpKind::kIdentity:
    case OpKind::kRegistered:  // attributes are checked against their declared ranges
      break;
  }
}

void CheckShapeLimits(const Shape& shape, const std::string& where, const char* field) {
  constexpr int64_t kMax = limits::kMaxExtent;
  CheckLimit(shape.c, kMax, where, field, "channel count ");
  CheckLimit(shape.h, kMax, where, field, "height ");
  CheckLimit(shape.w, kMax, where, field, "width ");
}

// An input error in the words shape inference has always used: a slice out
// of range names its producer; every other error reads as ResolveInput says.
std::string InputErrorText(const Graph& graph, const Node& node, const InputError& e) {
  if (e.kind() != InputError::Kind::kRange) return e.what();
  const Slice& s = node.inputs.at(static_cast<size_t>(e.term())).at(static_cast<size_t>(e.slice()));
  const Node& producer = graph.nodes[s.producer];
  return "inputs: slice [" + std::to_string(s.begin) + ", " + std::to_string(s.end) +
         ") out of range of " + Quoted(producer.name) + " with " +
         std::to_string(producer.output.c) + " channels";
}

}  // namespace

Shape InputShape(const std::vector<Shape>& term_shapes, const std::string& where) {
  if (term_shapes.empty()) throw Error(where + ": inputs: operator has no input");
  Shape in{0, term_shapes[0].h, term_shapes[0].w};
  for (const Shape& t : term_shapes) {
    if (t.h != in.h || t.w != in.w) {
      throw Error(where + ": inputs: spatial mismatch between concatenated terms (" +
                  ShapeText(term_shapes[0]) + " vs " + ShapeText(t) + ")");
    }
    in.c += t.c;
  }
  return in;
}

std::optional<Shape> EltwiseShape(const std::vector<Shape>& term_shapes, std::string* why) {
  Shape full = term_shapes.empty() ? Shape{} : term_shapes[0];
  for (const Shape& t : term_shapes) {
    if (int64_t{t.h} * t.w > int64_t{full.h} * full.w) full = t;
  }
  for (const Shape& t : term_shapes) {
    if (!(t == full) && !(t == Shape{full.c, 1, 1})) {
      if (why != nullptr) {
        *why = "eltwise terms differ in shape (" + ShapeText(full) + " vs " + ShapeText(t) +
               "; only " + ShapeText(Shape{full.c, 1, 1}) + " terms broadcast)";
      }
      return std::nullopt;
    }
  }
  return full;
}

Shape InferOpOutput(const OpParams& op, const std::vector<Shape>& term_shapes,
                    const std::string& where) {
  if (op.kind == OpKind::kEltwise) {
    if (term_shapes.size() < 2) throw Error(where + ": inputs: eltwise needs at least two terms");
    // Terms of the output's shape, or C x 1 x 1 ones applied to every pixel
    // (squeeze-and-excitation scales channels that way).
    std::string why;
    const std::optional<Shape> shape = EltwiseShape(term_shapes, &why);
    if (!shape) throw Error(where + ": inputs: " + why);
    return *shape;
  }
  if (op.kind == OpKind::kSequential) {
    if (op.chain.empty()) throw Error(where + ": nodes: sequential operator is empty");
    Shape shape = InputShape(term_shapes, where);
    for (size_t i = 0; i < op.chain.size(); ++i) {
      const OpParams& inner = op.chain[i];
      const std::string inner_where = where + " (sequential step " + std::to_string(i) + ")";
      if (inner.kind == OpKind::kSequential || inner.kind == OpKind::kInput ||
          inner.kind == OpKind::kEltwise) {
        throw Error(inner_where + ": type: " + KindName(inner) +
                    " cannot be a step of a sequential operator");
      }
      shape = InferOpOutput(inner, {shape}, inner_where);
    }
    return shape;
  }
  const Shape in = InputShape(term_shapes, where);
  switch (op.kind) {
    case OpKind::kInput:
      throw Error(where + ": type: an input placeholder cannot have inputs");
    case OpKind::kConv: {
      const ConvParams& c = op.conv;
      if (c.out_channels < 1) throw Error(where + ": out_channels: must be >= 1");
      if (c.groups < 1 || in.c % c.groups != 0 || c.out_channels % c.groups != 0) {
        throw Error(where + ": groups: " + std::to_string(c.groups) +
                    " does not divide input channels " + std::to_string(in.c) +
                    " and out_channels " + std::to_string(c.out_channels));
      }
      return {c.out_channels,
              WindowOutput(in.h, c.kernel.h, c.stride.h, c.padding.h, c.dilation.h, where, "height",
                           c.padding_end_extra.h),
              WindowOutput(in.w, c.kernel.w, c.stride.w, c.padding.w, c.dilation.w, where, "width",
                           c.padding_end_extra.w)};
    }
    case OpKind::kPool: {
      const PoolParams& p = op.pool;
      if (p.type == PoolType::kGlobalAvg || p.type == PoolType::kGlobalMax) return {in.c, 1, 1};
      if (p.ceil && p.type != PoolType::kMax) {
        throw Error(where + ": ceil_mode: only max pooling rounds its output size up here");
      }
      if (p.exclude_padding && p.type != PoolType::kAvg) {
        throw Error(where + ": count_include_pad: only an average pool leaves its padding out");
      }
      if (p.ceil) {
        return {in.c, CeilPoolOutput(in.h, p.kernel.h, p.stride.h, p.padding.h, where, "height"),
                CeilPoolOutput(in.w, p.kernel.w, p.stride.w, p.padding.w, where, "width")};
      }
      return {in.c, WindowOutput(in.h, p.kernel.h, p.stride.h, p.padding.h, 1, where, "height"),
              WindowOutput(in.w, p.kernel.w, p.stride.w, p.padding.w, 1, where, "width")};
    }
    case OpKind::kActivation:
    case OpKind::kIdentity:
      return in;
    case OpKind::kRegistered:
      CheckAttributes(op.registered, where);
      return SpecOf(op.registered.kind).infer(op.registered, in, where);
    case OpKind::kEltwise:
    case OpKind::kSequential:
      break;  // handled above
  }
  throw Error(where + ": type: unsupported operator");
}

void InferShapes(Graph& graph) {
  const std::string graph_where = "graph " + Quoted(graph.name);
  if (graph.nodes.empty()) throw Error(graph_where + ": it has no nodes");
  Node& input = graph.nodes[0];
  if (input.op.kind != OpKind::kInput) {
    throw Error(graph_where + ": node " + Quoted(input.name) +
                ": the first node must be the input placeholder");
  }
  if (input.output.c < 1 || input.output.h < 1 || input.output.w < 1) {
    throw Error(graph_where + ": input " + Quoted(input.name) +
                ": output_shape must be positive, got " + ShapeText(input.output));
  }
  CheckShapeLimits(input.output, "input " + Quoted(input.name), "output_shape");
  std::unordered_map<std::string, NodeId> by_name;
  for (NodeId id = 0; id < static_cast<NodeId>(graph.nodes.size()); ++id) {
    Node& node = graph.nodes[id];
    const std::string where = "node " + Quoted(node.name);
    if (node.name.empty()) {
      throw Error("node at index " + std::to_string(id) + ": name: empty (every node needs a " +
                  "unique non-empty name)");
    }
    if (!by_name.emplace(node.name, id).second) throw Error(where + ": name: duplicated");
    if (id == 0) continue;
    if (node.op.kind == OpKind::kInput) throw Error(where + ": type: only node 0 may be the input");
    CheckOpLimits(node.op, where);
    ResolvedInput resolved;
    try {
      resolved = ResolveNodeInput(graph, id, node.op.kind, node.inputs);
    } catch (const InputError& e) {
      throw Error(where + ": " + InputErrorText(graph, node, e));
    }
    node.output = InferOpOutput(node.op, resolved.TermShapes(), where);
    CheckShapeLimits(node.output, where, "output");
  }
  // Blocks: every operator belongs to exactly one block, inputs stay inside
  // the block or come from its entry.
  std::vector<int> block_of(graph.nodes.size(), -1);
  NodeId expected_enter = 0;
  for (size_t b = 0; b < graph.blocks.size(); ++b) {
    const Block& block = graph.blocks[b];
    const std::string where = "block " + std::to_string(b);
    if (block.enter != expected_enter) {
      throw Error(where + ": enter_node: must be " +
                  (b == 0 ? std::string("the graph input") : "the previous block's exit"));
    }
    for (NodeId id : block.Operators()) {
      if (id <= 0 || id >= static_cast<NodeId>(graph.nodes.size())) {
        throw Error(where + ": operator #" + std::to_string(id) + " does not exist");
      }
      if (block_of[id] != -1) {
        throw Error(where + ": node " + Quoted(graph.nodes[id].name) + " belongs to two blocks");
      }
      block_of[id] = static_cast<int>(b);
    }
    for (NodeId id : block.Operators()) {
      for (const Term& term : graph.nodes[id].inputs) {
        for (const Slice& s : term) {
          if (s.producer != block.enter && block_of[s.producer] != static_cast<int>(b)) {
            throw Error(where + ": node " + Quoted(graph.nodes[id].name) + ": inputs: reads " +
                        Quoted(graph.nodes[s.producer].name) + " from outside the block");
          }
        }
      }
    }
    if (!block.parts.empty()) {
      std::vector<int> seen(graph.nodes.size(), 0);
      for (const auto& part : block.parts) {
        for (NodeId id : part) {
          if (id <= 0 || id >= static_cast<NodeId>(graph.nodes.size()) ||
              block_of[id] != static_cast<int>(b) || seen[id]++) {
            throw Error(where + ": parts: every operator of the block must be in exactly one part");
          }
        }
      }
      for (NodeId id : block.Operators()) {
        if (!seen[id]) {
          throw Error(where + ": parts: node " + Quoted(graph.nodes[id].name) + " is in no part");
        }
      }
      // Parts are searched and run one after another in the order listed, so
      // a part may read only the block's entry, itself and earlier parts.
      std::vector<int> part_of(graph.nodes.size(), -1);
      for (size_t p = 0; p < block.parts.size(); ++p) {
        for (NodeId id : block.parts[p]) part_of[id] = static_cast<int>(p);
      }
      for (size_t p = 0; p < block.parts.size(); ++p) {
        for (NodeId id : block.parts[p]) {
          for (const Term& term : graph.nodes[id].inputs) {
            for (const Slice& s : term) {
              if (s.producer == block.enter || part_of[s.producer] <= static_cast<int>(p)) continue;
              throw Error(where + ": parts[" + std::to_string(p) + "]: node " +
                          Quoted(graph.nodes[id].name) + " reads " +
                          Quoted(graph.nodes[s.producer].name) + " from the later part " +
                          std::to_string(part_of[s.producer]));
            }
          }
        }
      }
    }
    expected_enter = block.exit;
  }
  if (!graph.blocks.empty()) {
    for (NodeId id = 1; id < static_cast<NodeId>(graph.nodes.size()); ++id) {
      if (block_of[id] == -1) {
        throw Error("node " + Quoted(graph.nodes[id].name) + ": is in no block");
      }
    }
  }
}

namespace {

// Every operator of a block but the exit must be read by another operator of
// the block: nothing outside reads it (later blocks read only the exit), so
// a second sink would be scheduled and priced for a value nobody uses.
void CheckBlockSinks(const Graph& graph, const Block& block, const std::string& where) {
  std::vector<char> read(graph.nodes.size(), 0);
  for (NodeId id : block.Operators()) {
    for (const Term& term : graph.nodes[id].inputs) {
      for (const Slice& s : term) read[s.producer] = 1;
    }
  }
  const Node& exit = graph.nodes[block.exit];
  bool exit_reads_block = block.inner.empty();
  for (const Term& term : exit.inputs) {
    for (const Slice& s : term) exit_reads_block |= s.producer != block.enter;
  }
  if (!exit_reads_block) {
    throw Error(where + ": exit_node " + Quoted(exit.name) +
                ": reads none of the block's operators, so they would be computed for nothing "
                "(the exit must be the block's only sink)");
  }
  for (NodeId id : block.inner) {
    if (!read[id]) {
      throw Error(where + ": node " + Quoted(graph.nodes[id].name) +
                  ": a second sink: no operator of the block reads it (the exit must be the "
                  "block's only sink)");
    }
  }
}

}  // namespace

void CheckSingleSinkBlocks(const Graph& graph) {
  for (size_t b = 0; b < graph.blocks.size(); ++b) {
    CheckBlockSinks(graph, graph.blocks[b], "block " + std::to_string(b));
  }
}

namespace {

std::string WindowText(const Window& w) { return std::to_string(w.h) + "x" + std::to_string(w.w); }

}  // namespace

std::string Describe(const OpParams& op) {
  std::ostringstream out;
  switch (op.kind) {
    case OpKind::kConv: {
      const ConvParams& c = op.conv;
      out << "conv" << WindowText(c.kernel) << "/" << WindowText(c.stride) << " p"
          << WindowText(c.padding);
      if (!(c.padding_end_extra == Window{0, 0})) out << "+" << WindowText(c.padding_end_extra);
      if (!(c.dilation == Window{1, 1})) out << " d" << WindowText(c.dilation);
      if (c.groups != 1) out << " g" << c.groups;
      out << " " << c.out_channels;
      if (c.act != Activation::kNone) out << " " << ToString(c.act);
      break;
    }
    case OpKind::kPool:
      out << ToString(op.pool.type) << "pool";
      if (op.pool.type == PoolType::kMax || op.pool.type == PoolType::kAvg) {
        out << WindowText(op.pool.kernel) << "/" << WindowText(op.pool.stride) << " p"
            << WindowText(op.pool.padding);
        if (op.pool.ceil) out << " ceil";
        if (op.pool.exclude_padding) out << " excluding padding";
      }
      break;
    case OpKind::kActivation:
      out << ToString(op.act);
      break;
    case OpKind::kEltwise:
      out << (op.eltwise == EltwiseType::kAdd ? "add" : "mul");
      break;
    case OpKind::kSequential:
      for (size_t i = 0; i < op.chain.size(); ++i) out << (i ? " > " : "") << Describe(op.chain[i]);
      break;
    case OpKind::kRegistered:
      out << SpecOf(op.registered.kind).describe(op.registered);
      break;
    default:
      out << ToString(op.kind);
      break;
  }
  return out.str();
}

}  // namespace ios
