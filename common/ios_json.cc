#include "common/ios_json.h"

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <unordered_map>

#include "common/activation.h"
#include "common/error.h"
#include "common/input_file.h"
#include "common/op_kinds.h"
#include "common/printable.h"
#include "common/slices.h"

namespace ios {

using nlohmann::json;

bool IosModel::HasSchedule() const {
  for (const auto& block_stages : stages) {
    if (!block_stages.empty()) return true;
  }
  return false;
}

namespace {

// Carries the position in the document so every error names it.
class Parser {
 public:
  explicit Parser(const std::string& source) : source_(Printable(source)) {
    // A file without a top-level name is named after its stem.
    default_name_ = std::filesystem::path(source).stem().string();
    if (default_name_.empty()) default_name_ = "model";
  }

  IosModel Parse(const json& doc) {
    IosModel model;
    Graph& g = model.graph;
    if (!doc.is_object()) Fail("", "the document must be a JSON object");
    g.name = doc.contains("name") ? String(doc, "name", "") : default_name_;
    const json& input = Field(doc, "input", "");
    Node in;
    in.name = NodeName(input, "input");
    in.hint = OptionalString(input, "hint_name", in.name);
    in.op.kind = OpKind::kInput;
    in.output = ShapeOf(Field(input, "output_shape", "input"), "input.output_shape");
    AddNode(g, std::move(in), "input");
    const json& blocks = Field(doc, "blocks", "");
    if (!blocks.is_array() || blocks.empty()) Fail("blocks", "expected a non-empty array");
    for (size_t b = 0; b < blocks.size(); ++b) {
      const std::string where = "blocks[" + std::to_string(b) + "]";
      const json& jb = blocks[b];
      Block block;
      const std::string enter_name = String(jb, "enter_name", where);
      auto enter = by_name_.find(enter_name);
      if (enter == by_name_.end()) {
        Fail(where + ".enter_name", "unknown node " + Quoted(enter_name));
      }
      block.enter = enter->second;
      // enter_node repeats the entering node; a copy that names another
      // node is a contradiction, not something to pick a side of.
      if (jb.contains("enter_node")) {
        const std::string copy =
            String(Field(jb, "enter_node", where), "name", where + ".enter_node");
        if (copy != enter_name) {
          Fail(where + ".enter_node.name",
               Quoted(copy) + " contradicts enter_name " + Quoted(enter_name));
        }
      }
      const json& inner = Field(jb, "inner_nodes", where);
      if (!inner.is_array()) Fail(where + ".inner_nodes", "expected an array");
      for (size_t i = 0; i < inner.size(); ++i) {
        block.inner.push_back(AddNode(
            g, ParseNode(inner[i], where + ".inner_nodes[" + std::to_string(i) + "]"), where));
      }
      block.exit =
          AddNode(g, ParseNode(Field(jb, "exit_node", where), where + ".exit_node"), where);
      block.parts = ParseParts(jb, where);
      g.blocks.push_back(std::move(block));
      model.stages.push_back(ParseStages(jb, where));
    }
    try {
      InferShapes(g);
      CheckSingleSinkBlocks(g);
    } catch (const Error& e) {
      throw Error(source_ + ": " + e.what());
    }
    for (const auto& [id, shape] : stored_shapes_) {
      if (!(g.nodes[id].output == shape)) {
        Fail("node " + Quoted(g.nodes[id].name) + ".output_shape",
             "stored shape disagrees with the inferred " + std::to_string(g.nodes[id].output.c) +
                 "x" + std::to_string(g.nodes[id].output.h) + "x" +
                 std::to_string(g.nodes[id].output.w));
      }
    }
    return model;
  }

 private:
  [[noreturn]] void Fail(const std::string& where, const std::string& what) const {
    throw Error(source_ + ": " + (where.empty() ? "" : where + ": ") + what);
  }

  const json& Field(const json& obj, const char* key, const std::string& where) const {
    if (!obj.is_object()) Fail(where, "expected an object");
    auto it = obj.find(key);
    if (it == obj.end()) Fail(where.empty() ? key : where + "." + key, "missing field");
    return *it;
  }

  std::string String(const json& obj, const char* key, const std::string& where) const {
    const json& v = Field(obj, key, where);
    if (!v.is_string()) Fail(where + "." + key, "expected a string");
    return v.get<std::string>();
  }

  std::string OptionalString(const json& obj, const char* key, const std::string& fallback) const {
    auto it = obj.find(key);
    return it != obj.end() && it->is_string() ? it->get<std::string>() : fallback;
  }

  bool Bool(const json& obj, const char* key, const std::string& where, bool fallback) const {
    auto it = obj.find(key);
    if (it == obj.end()) return fallback;
    if (!it->is_boolean()) {
      Fail(where + "." + key, "expected true or false, got " + Printable(it->dump()));
    }
    return it->get<bool>();
  }

  // A node's name: non-empty (messages and stages refer to nodes by name).
  std::string NodeName(const json& jn, const std::string& where) const {
    std::string name = String(jn, "name", where);
    if (name.empty()) Fail(where + ".name", "empty (every node needs a unique non-empty name)");
    return name;
  }

  // Integers are read into `int`; the worker limits (common/limits.h) are
  // checked later by InferShapes, which knows which node and field to blame.
  int Int(const json& v, const std::string& where) const {
    if (!v.is_number_integer()) Fail(where, "expected an integer, got " + Printable(v.dump()));
    if (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t{kIntLimit}) {
      Fail(where, Printable(v.dump()) + " is out of range (expected an integer of magnitude at " +
                      "most 2^30)");
    }
    const auto x = v.get<int64_t>();
    if (x < -kIntLimit || x > kIntLimit) {
      Fail(where, std::to_string(x) + " is out of range (expected an integer of magnitude at " +
                      "most 2^30)");
    }
    return static_cast<int>(x);
  }

  // A float attribute: any JSON number, rounded to the nearest float (the
  // writer's numbers read back to the same bits). Its range is the kind's.
  float Float(const json& v, const std::string& where) const {
    if (!v.is_number()) Fail(where, "expected a number, got " + Printable(v.dump()));
    return static_cast<float>(v.get<double>());
  }

  Window Pair(const json& obj, const char* key, const std::string& where,
              std::optional<Window> fallback = std::nullopt) const {
    if (fallback && !obj.contains(key)) return *fallback;
    const json& v = Field(obj, key, where);
    const std::string at = where + "." + key;
    if (!v.is_array() || v.size() != 2) Fail(at, "expected [height, width]");
    return {Int(v[0], at + "[0]"), Int(v[1], at + "[1]")};
  }

  Shape ShapeOf(const json& v, const std::string& where) const {
    if (!v.is_array() || v.size() != 3) Fail(where, "expected [channels, height, width]");
    return {Int(v[0], where + "[0]"), Int(v[1], where + "[1]"), Int(v[2], where + "[2]")};
  }

  Activation ActivationOf(const std::string& text, const std::string& where) const {
    if (text == "identity") return Activation::kNone;  // the reference's word for none
    if (const std::optional<Activation> act = ActivationNamed(text)) return *act;
    Fail(where, "unknown activation '" + text + "' (expected identity, " + ActivationNames() + ")");
  }

  OpParams ParseOp(const json& jn, const std::string& where) const {
    OpParams op;
    const std::string type = String(jn, "type", where);
    if (type == "conv") {
      op.kind = OpKind::kConv;
      ConvParams& c = op.conv;
      c.out_channels = Int(Field(jn, "out_channels", where), where + ".out_channels");
      c.kernel = Pair(jn, "kernel", where);
      c.stride = Pair(jn, "stride", where);
      c.padding = Pair(jn, "padding", where);
      c.padding_end_extra = Pair(jn, "padding_end_extra", where, Window{0, 0});
      c.dilation = Pair(jn, "dilation", where, Window{1, 1});
      c.groups = jn.contains("groups") ? Int(jn["groups"], where + ".groups") : 1;
      c.bias = Bool(jn, "bias", where, true);
      c.act =
          ActivationOf(jn.contains("act") ? String(jn, "act", where) : "identity", where + ".act");
    } else if (type == "pool") {
      op.kind = OpKind::kPool;
      const std::string pt = String(jn, "pool_type", where);
      if (pt == "max")
        op.pool.type = PoolType::kMax;
      else if (pt == "avg")
        op.pool.type = PoolType::kAvg;
      else if (pt == "global_max")
        op.pool.type = PoolType::kGlobalMax;
      else if (pt == "global_avg")
        op.pool.type = PoolType::kGlobalAvg;
      else
        Fail(where + ".pool_type", "unknown pool type '" + pt + "'");
      op.pool.kernel = Pair(jn, "kernel", where, Window{1, 1});
      op.pool.stride = Pair(jn, "stride", where, Window{1, 1});
      op.pool.padding = Pair(jn, "padding", where, Window{0, 0});
      if (jn.contains("ceil_mode")) {
        if (!jn["ceil_mode"].is_boolean()) Fail(where + ".ceil_mode", "expected true or false");
        op.pool.ceil = jn["ceil_mode"].get<bool>();
      }
      if (jn.contains("count_include_pad")) {
        if (!jn["count_include_pad"].is_boolean()) {
          Fail(where + ".count_include_pad", "expected true or false");
        }
        op.pool.exclude_padding = !jn["count_include_pad"].get<bool>();
      }
    } else if (type == "identity") {
      op.kind = OpKind::kIdentity;
    } else if (type == "relu") {
      op.kind = OpKind::kActivation;
      op.act = Activation::kRelu;
    } else if (type == "activation") {
      op.kind = OpKind::kActivation;
      op.act = ActivationOf(String(jn, "act_type", where), where + ".act_type");
    } else if (type == "element") {
      op.kind = OpKind::kEltwise;
      const std::string et = String(jn, "op_type", where);
      if (et == "add")
        op.eltwise = EltwiseType::kAdd;
      else if (et == "mul")
        op.eltwise = EltwiseType::kMul;
      else
        Fail(where + ".op_type", "unknown element-wise op '" + et + "' (expected add or mul)");
    } else if (type == "sequential") {
      op.kind = OpKind::kSequential;
    } else if (const OpKindSpec* spec = RegisteredKindNamed(type)) {
      // Its declared attributes, each an optional integer or number field.
      op = MakeRegisteredOp(spec->kind);
      for (size_t i = 0; i < spec->attributes.size(); ++i) {
        const std::string name(spec->attributes[i].name);
        if (!jn.contains(name)) continue;
        op.registered.attributes[i] = spec->attributes[i].is_float
                                          ? FloatBits(Float(jn[name], where + "." + name))
                                          : Int(jn[name], where + "." + name);
      }
      try {
        CheckAttributes(op.registered, where);
      } catch (const Error& e) {
        Fail("", e.what());
      }
    } else {
      Fail(where + ".type", "unknown operator type '" + type +
                                "' (expected conv, pool, relu, activation, element, "
                                "identity, sequential, " +
                                RegisteredKindNames() + ")");
    }
    return op;
  }

  Inputs ParseInputs(const json& v, const std::string& where) const {
    if (!v.is_array()) Fail(where, "expected a list of terms");
    Inputs inputs;
    for (size_t t = 0; t < v.size(); ++t) {
      const std::string tw = where + "[" + std::to_string(t) + "]";
      if (!v[t].is_array() || v[t].empty()) Fail(tw, "expected a non-empty list of slices");
      Term term;
      for (size_t s = 0; s < v[t].size(); ++s) {
        const std::string sw = tw + "[" + std::to_string(s) + "]";
        const json& js = v[t][s];
        if (!js.is_array() || js.size() != 3 || !js[0].is_string()) {
          Fail(sw, "expected [producer_name, begin, end]");
        }
        const std::string producer = js[0].get<std::string>();
        auto it = by_name_.find(producer);
        if (it == by_name_.end()) {
          Fail(sw, "unknown producer " + Quoted(producer) + " (not defined before this node)");
        }
        term.push_back({it->second, Int(js[1], sw + "[1]"), Int(js[2], sw + "[2]")});
      }
      inputs.push_back(std::move(term));
    }
    return inputs;
  }

  Node ParseNode(const json& jn, const std::string& where) {
    Node node;
    node.name = NodeName(jn, where);
    const std::string at = where + " (" + Quoted(node.name) + ")";
    node.hint = OptionalString(jn, "hint_name", node.name);
    node.op = ParseOp(jn, at);
    if (node.op.kind == OpKind::kSequential) {
      const json& inner = Field(jn, "nodes", at);
      if (!inner.is_array() || inner.empty()) Fail(at + ".nodes", "expected a non-empty array");
      std::string previous;
      for (size_t i = 0; i < inner.size(); ++i) {
        const std::string iw = at + ".nodes[" + std::to_string(i) + "]";
        node.op.chain.push_back(ParseOp(inner[i], iw));
        if (node.op.chain.back().kind == OpKind::kSequential) Fail(iw, "nested sequential");
        if (i == 0) {
          node.inputs = ParseInputs(Field(inner[i], "inputs", iw), iw + ".inputs");
        } else {
          // Each step reads the whole output of the step before it.
          const json& in = Field(inner[i], "inputs", iw);
          if (!in.is_array() || in.size() != 1 || !in[0].is_array() || in[0].size() != 1 ||
              !in[0][0].is_array() || in[0][0].empty() || in[0][0][0] != previous) {
            Fail(iw + ".inputs",
                 "a sequential step must read the previous step " + Quoted(previous));
          }
        }
        previous = String(inner[i], "name", iw);
      }
    } else {
      node.inputs = ParseInputs(Field(jn, "inputs", at), at + ".inputs");
    }
    if (jn.contains("output_shape")) {
      pending_shape_ = ShapeOf(jn["output_shape"], at + ".output_shape");
    } else {
      pending_shape_.reset();
    }
    return node;
  }

  NodeId AddNode(Graph& g, Node node, const std::string& where) {
    const auto id = static_cast<NodeId>(g.nodes.size());
    if (!by_name_.emplace(node.name, id).second) {
      Fail(where, "node name " + Quoted(node.name) + " is defined twice");
    }
    if (id == 0) {
      g.nodes.push_back(std::move(node));
      return id;
    }
    if (pending_shape_) stored_shapes_.emplace_back(id, *pending_shape_);
    g.nodes.push_back(std::move(node));
    return id;
  }

  // Optional explicit parts of a block, by node name (ours, not the
  // reference's: it cuts NASNet into parts but does not store them).
  // InferShapes checks that they cover the block's operators once.
  std::vector<std::vector<NodeId>> ParseParts(const json& jb, const std::string& where) const {
    std::vector<std::vector<NodeId>> parts;
    auto it = jb.find("parts");
    if (it == jb.end() || it->is_null()) return parts;
    const std::string pw = where + ".parts";
    if (!it->is_array()) Fail(pw, "expected a list of parts (lists of node names)");
    for (size_t p = 0; p < it->size(); ++p) {
      const json& jp = (*it)[p];
      const std::string at = pw + "[" + std::to_string(p) + "]";
      if (!jp.is_array() || jp.empty()) Fail(at, "expected a non-empty list of node names");
      std::vector<NodeId> part;
      for (size_t k = 0; k < jp.size(); ++k) {
        const std::string kw = at + "[" + std::to_string(k) + "]";
        if (!jp[k].is_string()) Fail(kw, "expected a node name");
        auto node = by_name_.find(jp[k].get<std::string>());
        if (node == by_name_.end()) Fail(kw, "unknown node " + Quoted(jp[k].get<std::string>()));
        part.push_back(node->second);
      }
      parts.push_back(std::move(part));
    }
    return parts;
  }

  std::vector<std::vector<std::vector<std::string>>> ParseStages(const json& jb,
                                                                 const std::string& where) const {
    std::vector<std::vector<std::vector<std::string>>> stages;
    auto it = jb.find("stages");
    if (it == jb.end() || it->is_null()) return stages;
    const std::string sw = where + ".stages";
    if (!it->is_array()) Fail(sw, "expected a list of stages");
    for (size_t s = 0; s < it->size(); ++s) {
      const json& js = (*it)[s];
      if (!js.is_array()) Fail(sw + "[" + std::to_string(s) + "]", "expected a list of groups");
      std::vector<std::vector<std::string>> stage;
      for (const json& jg : js) {
        if (!jg.is_array()) Fail(sw + "[" + std::to_string(s) + "]", "expected a list of names");
        std::vector<std::string> group;
        for (const json& name : jg) {
          if (!name.is_string()) Fail(sw + "[" + std::to_string(s) + "]", "expected node names");
          group.push_back(name.get<std::string>());
        }
        stage.push_back(std::move(group));
      }
      stages.push_back(std::move(stage));
    }
    return stages;
  }

  static constexpr int64_t kIntLimit = int64_t{1} << 30;

  std::string source_;
  std::string default_name_;
  std::unordered_map<std::string, NodeId> by_name_;
  std::optional<Shape> pending_shape_;
  std::vector<std::pair<NodeId, Shape>> stored_shapes_;
};

// Follows a failed parse to say where in the document it failed: the path of
// keys and indices (as the Parser names fields) and the name of the node
// being read, if it came before the failure.
class PathTracker : public nlohmann::json_sax<json> {
 public:
  bool null() override { return Value(); }
  bool boolean(bool) override { return Value(); }
  bool number_integer(number_integer_t) override { return Value(); }
  bool number_unsigned(number_unsigned_t) override { return Value(); }
  bool number_float(number_float_t, const string_t&) override { return Value(); }
  bool binary(binary_t&) override { return Value(); }
  bool string(string_t& value) override {
    if (!stack_.empty() && !stack_.back().array && stack_.back().key == "name") {
      stack_.back().name = value;
    }
    return Value();
  }
  bool start_object(std::size_t) override { return Push(false); }
  bool start_array(std::size_t) override { return Push(true); }
  bool end_object() override { return Pop(); }
  bool end_array() override { return Pop(); }
  bool key(string_t& key) override {
    stack_.back().key = key;
    return true;
  }
  bool parse_error(std::size_t position, const std::string& token,
                   const nlohmann::detail::exception& error) override {
    position_ = position;
    token_ = token;
    overflow_ = error.id == 406;  // number overflow
    library_message_ = error.what();
    return false;
  }

  //! e.g. "blocks[0].inner_nodes[1] ('conv1').out_channels".
  std::string Path() const {
    std::string path;
    for (size_t i = 0; i < stack_.size(); ++i) {
      const Frame& f = stack_[i];
      if (f.array) {
        path += "[" + std::to_string(f.index) + "]";
        continue;
      }
      if (i > 0 && f.name) path += " (" + Quoted(*f.name) + ")";
      if (!f.key.empty()) path += (path.empty() ? "" : ".") + Printable(f.key);
    }
    return path;
  }
  size_t position() const { return position_; }
  const std::string& token() const { return token_; }
  bool overflow() const { return overflow_; }
  const std::string& library_message() const { return library_message_; }

 private:
  struct Frame {
    bool array = false;
    size_t index = 0;  // arrays: elements completed so far
    std::string key;   // objects: the current key
    std::optional<std::string> name;
  };
  bool Value() {
    if (!stack_.empty() && stack_.back().array) ++stack_.back().index;
    return true;
  }
  bool Push(bool array) {
    stack_.push_back(Frame{array, 0, {}, {}});
    return true;
  }
  bool Pop() {
    stack_.pop_back();
    return Value();
  }

  std::vector<Frame> stack_;
  size_t position_ = 0;
  std::string token_;
  bool overflow_ = false;
  std::string library_message_;
};

// The message for text json::parse refused: file, line and column, the field
// being read and, for a number too large for a double, what was expected.
std::string DescribeSyntaxError(const std::string& text, const std::string& source) {
  PathTracker tracker;
  json::sax_parse(text, &tracker, json::input_format_t::json, /*strict=*/true);
  const size_t end = std::min(tracker.position(), text.size());
  size_t line = 1, column = 1;
  for (size_t i = 0; i < end; ++i) {
    if (text[i] == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
  }
  std::string message =
      Printable(source) + ":" + std::to_string(line) + ":" + std::to_string(column) + ": ";
  const std::string path = tracker.Path();
  if (!path.empty()) message += path + ": ";
  if (tracker.overflow()) {
    return message + "number " + Printable(tracker.token()) +
           " is too large to represent (expected a number of ordinary size; integers are at "
           "most 2^30 in magnitude)";
  }
  return message + "not valid JSON (" + Printable(tracker.library_message()) + ")";
}

}  // namespace

IosModel ParseIosJson(const std::string& text, const std::string& source) {
  json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) throw Error(DescribeSyntaxError(text, source));
  try {
    return Parser(source).Parse(doc);
  } catch (const json::exception& e) {
    // Every access is checked first; this is a last resort with the file.
    throw Error(Printable(source) + ": unexpected value type (" + e.what() + ")");
  }
}

std::string ReadJsonInputFile(const std::string& path, std::string_view kind) {
  return ReadInputFile(path, kind, kMaxModelFileBytes);
}

IosModel LoadIosJson(const std::string& path) {
  return ParseIosJson(ReadJsonInputFile(path, "model"), path);
}

bool StructurallyEqual(const Graph& a, const Graph& b, std::string* difference) {
  auto differ = [&](const std::string& what) {
    if (difference) *difference = what;
    return false;
  };
  if (a.nodes.size() != b.nodes.size()) {
    return differ("node count " + std::to_string(a.nodes.size()) + " vs " +
                  std::to_string(b.nodes.size()));
  }
  for (size_t i = 0; i < a.nodes.size(); ++i) {
    const Node& x = a.nodes[i];
    const Node& y = b.nodes[i];
    const std::string at =
        "node #" + std::to_string(i) + " (" + Quoted(x.name) + " vs " + Quoted(y.name) + ")";
    if (!(x.op == y.op))
      return differ(at + ": operator " + Describe(x.op) + " vs " + Describe(y.op));
    if (!(x.output == y.output)) return differ(at + ": output shape");
    if (x.inputs != y.inputs) return differ(at + ": inputs");
  }
  if (a.blocks.size() != b.blocks.size()) {
    return differ("block count " + std::to_string(a.blocks.size()) + " vs " +
                  std::to_string(b.blocks.size()));
  }
  for (size_t i = 0; i < a.blocks.size(); ++i) {
    const Block& x = a.blocks[i];
    const Block& y = b.blocks[i];
    if (x.enter != y.enter || x.inner != y.inner || x.exit != y.exit) {
      return differ("block " + std::to_string(i) + ": different operators");
    }
  }
  return true;
}

}  // namespace ios
