// The model zoo: the graph builder, Inception V3, SqueezeNet and the
// name -> builder table. NASNet and RandWire live in zoo_nasnet.cc and
// zoo_randwire.cc. Those four networks match, operator for operator, the
// graphs the IOS reference implementation exports (see docs/models.md); the
// generated ones (zoo_randwire_cifar.cc, zoo_darts.cc) are the Serenity
// paper's benchmark kinds.
#include "common/zoo.h"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <utility>

#include "common/error.h"
#include "common/printable.h"
#include "common/slices.h"
#include "common/zoo_builder.h"
#include "common/zoo_darts.h"
#include "common/zoo_randwire.h"

namespace ios {
namespace zoo {

OpParams Conv(int out_channels, Window kernel, Window stride, Window padding, Activation act,
              int groups) {
  OpParams op;
  op.kind = OpKind::kConv;
  op.conv.out_channels = out_channels;
  op.conv.kernel = kernel;
  op.conv.stride = stride;
  op.conv.padding = padding;
  op.conv.groups = groups;
  op.conv.bias = true;
  op.conv.act = act;
  return op;
}

OpParams Pool(PoolType type, Window kernel, Window stride, Window padding) {
  OpParams op;
  op.kind = OpKind::kPool;
  op.pool.type = type;
  op.pool.kernel = kernel;
  op.pool.stride = stride;
  op.pool.padding = padding;
  return op;
}

OpParams Relu() {
  OpParams op;
  op.kind = OpKind::kActivation;
  op.act = Activation::kRelu;
  return op;
}

GraphBuilder::GraphBuilder(std::string graph_name, Shape input) {
  graph_.name = std::move(graph_name);
  Node node;
  node.name = "input";
  node.op.kind = OpKind::kInput;
  node.output = input;
  graph_.nodes.push_back(std::move(node));
  names_.insert("input");
}

Inputs GraphBuilder::Of(NodeId node) const { return Sum({node}); }

Inputs GraphBuilder::Sum(const std::vector<NodeId>& nodes) const {
  Term term;
  for (NodeId node : nodes) term.push_back(Slice{node, 0, shape(node).c});
  return {term};
}

Inputs GraphBuilder::Concat(std::initializer_list<std::initializer_list<NodeId>> terms) const {
  Inputs inputs;
  for (const auto& term : terms) inputs.push_back(Sum(term).front());
  return inputs;
}

int GraphBuilder::Channels(const Inputs& inputs) const {
  const NodeId next = static_cast<NodeId>(graph_.nodes.size());
  return ResolveNodeInput(graph_, next, OpKind::kIdentity, inputs).shape.c;
}

NodeId GraphBuilder::Add(const std::string& name, OpParams op, Inputs inputs, std::string hint) {
  if (!in_block_) throw std::logic_error("zoo: '" + name + "' added outside a block");
  if (!names_.insert(name).second)
    throw std::logic_error("zoo: duplicate node name '" + name + "'");
  const std::vector<Shape> term_shapes =
      ResolveNodeInput(graph_, static_cast<NodeId>(graph_.nodes.size()), op.kind, inputs)
          .TermShapes();
  Node node;
  node.name = name;
  node.hint = std::move(hint);
  node.output = InferOpOutput(op, term_shapes, name);
  node.op = std::move(op);
  node.inputs = std::move(inputs);
  graph_.nodes.push_back(std::move(node));
  return last();
}

NodeId GraphBuilder::AddConv(const std::string& name, Inputs inputs, int out_channels,
                             Window kernel, Window stride, Window padding, Activation act,
                             int groups) {
  return Add(name, Conv(out_channels, kernel, stride, padding, act, groups), std::move(inputs));
}

NodeId GraphBuilder::AddPool(const std::string& name, Inputs inputs, PoolType type, Window kernel,
                             Window stride, Window padding) {
  return Add(name, Pool(type, kernel, stride, padding), std::move(inputs));
}

NodeId GraphBuilder::AddGlobalAvgPool(const std::string& name, NodeId input) {
  const Shape& in = shape(input);
  return AddPool(name, Of(input), PoolType::kGlobalAvg, Window{in.h, in.w}, Square(1), Square(0));
}

NodeId GraphBuilder::AddIdentity(const std::string& name, Inputs inputs) {
  OpParams op;
  op.kind = OpKind::kIdentity;
  return Add(name, op, std::move(inputs));
}

NodeId GraphBuilder::AddRelu(const std::string& name, Inputs inputs) {
  return Add(name, Relu(), std::move(inputs));
}

NodeId GraphBuilder::AddSequential(const std::string& name, std::string hint, Inputs inputs,
                                   std::vector<OpParams> chain) {
  OpParams op;
  op.kind = OpKind::kSequential;
  op.chain = std::move(chain);
  return Add(name, std::move(op), std::move(inputs), std::move(hint));
}

NodeId GraphBuilder::AddReluConv(const std::string& name, Inputs inputs, int out_channels,
                                 Window kernel, Window stride, Window padding) {
  return AddSequential(name, "ReluConv", std::move(inputs),
                       {Relu(), Conv(out_channels, kernel, stride, padding, Activation::kNone)});
}

NodeId GraphBuilder::AddReluSepConv(const std::string& name, Inputs inputs, int out_channels,
                                    Window kernel, Window stride, Window padding, Window dilation) {
  const int in_channels = Channels(inputs);
  OpParams depthwise = Conv(in_channels, kernel, stride, padding, Activation::kNone, in_channels);
  depthwise.conv.dilation = dilation;
  const bool dilated = dilation != Square(1);
  return AddSequential(name, dilated ? "ReluDilConv" : "ReluSepConv", std::move(inputs),
                       {Relu(), std::move(depthwise),
                        Conv(out_channels, Square(1), Square(1), Square(0), Activation::kNone)});
}

void GraphBuilder::BeginBlock() {
  if (in_block_) throw std::logic_error("zoo: block begun inside a block");
  in_block_ = true;
  block_first_ = part_first_ = last() + 1;
  parts_.clear();
}

void GraphBuilder::EndPart() {
  if (!in_block_ || last() < part_first_) throw std::logic_error("zoo: empty or stray part");
  std::vector<NodeId> part;
  for (NodeId id = part_first_; id <= last(); ++id) part.push_back(id);
  parts_.push_back(std::move(part));
  part_first_ = last() + 1;
}

void GraphBuilder::EndBlock() {
  if (!in_block_ || last() < block_first_) throw std::logic_error("zoo: empty or stray block");
  if (!parts_.empty() && part_first_ <= last()) {
    throw std::logic_error("zoo: block ends inside an open part");
  }
  Block block;
  block.enter = block_first_ - 1;
  for (NodeId id = block_first_; id < last(); ++id) block.inner.push_back(id);
  block.exit = last();
  block.parts = std::move(parts_);
  graph_.blocks.push_back(std::move(block));
  parts_.clear();
  in_block_ = false;
}

Graph GraphBuilder::Finish() {
  if (in_block_) throw std::logic_error("zoo: graph finished inside a block");
  InferShapes(graph_);
  return std::move(graph_);
}

namespace {

// Convolution followed by ReLU (batch norm folded away), the unit Inception
// V3 and SqueezeNet are made of.
NodeId ConvRelu(GraphBuilder& b, const std::string& name, NodeId input, int out_channels,
                Window kernel, Window stride = Square(1), Window padding = Square(0)) {
  return b.AddConv(name, b.Of(input), out_channels, kernel, stride, padding, Activation::kRelu);
}

NodeId Pool3x3(GraphBuilder& b, const std::string& name, NodeId input, PoolType type, int stride,
               int padding) {
  return b.AddPool(name, b.Of(input), type, Square(3), Square(stride), Square(padding));
}

// ---- Inception V3 (Szegedy et al. 2016; torchvision's layer names) ----

constexpr Window k1x7{1, 7}, k7x1{7, 1}, k1x3{1, 3}, k3x1{3, 1};
constexpr Window p0x3{0, 3}, p3x0{3, 0}, p0x1{0, 1}, p1x0{1, 0};

// 35x35: 1x1 | 1x1-5x5 | 1x1-3x3-3x3 | avgpool-1x1.
NodeId InceptionA(GraphBuilder& b, const std::string& name, NodeId x, int pool_features) {
  NodeId b1 = ConvRelu(b, name + ".branch1x1", x, 64, Square(1));
  NodeId b5 = ConvRelu(b, name + ".branch5x5_1", x, 48, Square(1));
  b5 = ConvRelu(b, name + ".branch5x5_2", b5, 64, Square(5), Square(1), Square(2));
  NodeId d = ConvRelu(b, name + ".branch3x3dbl_1", x, 64, Square(1));
  d = ConvRelu(b, name + ".branch3x3dbl_2", d, 96, Square(3), Square(1), Square(1));
  d = ConvRelu(b, name + ".branch3x3dbl_3", d, 96, Square(3), Square(1), Square(1));
  NodeId pool = Pool3x3(b, name + ".avgpool", x, PoolType::kAvg, 1, 1);
  NodeId bp = ConvRelu(b, name + ".branch_pool", pool, pool_features, Square(1));
  return b.AddIdentity(name, b.Concat({{b1}, {b5}, {d}, {bp}}));
}

// 35x35 -> 17x17 reduction.
NodeId InceptionB(GraphBuilder& b, const std::string& name, NodeId x) {
  NodeId b3 = ConvRelu(b, name + ".branch3x3", x, 384, Square(3), Square(2));
  NodeId d = ConvRelu(b, name + ".branch3x3dbl_1", x, 64, Square(1));
  d = ConvRelu(b, name + ".branch3x3dbl_2", d, 96, Square(3), Square(1), Square(1));
  d = ConvRelu(b, name + ".branch3x3dbl_3", d, 96, Square(3), Square(2));
  NodeId pool = Pool3x3(b, name + ".maxpool", x, PoolType::kMax, 2, 0);
  return b.AddIdentity(name, b.Concat({{b3}, {d}, {pool}}));
}

// 17x17 with factorised 7x7 convolutions of `c7` channels.
NodeId InceptionC(GraphBuilder& b, const std::string& name, NodeId x, int c7) {
  NodeId b1 = ConvRelu(b, name + ".branch1x1", x, 192, Square(1));
  NodeId s = ConvRelu(b, name + ".branch7x7_1", x, c7, Square(1));
  s = ConvRelu(b, name + ".branch7x7_2", s, c7, k1x7, Square(1), p0x3);
  s = ConvRelu(b, name + ".branch7x7_3", s, 192, k7x1, Square(1), p3x0);
  NodeId d = ConvRelu(b, name + ".branch7x7dbl_1", x, c7, Square(1));
  d = ConvRelu(b, name + ".branch7x7dbl_2", d, c7, k7x1, Square(1), p3x0);
  d = ConvRelu(b, name + ".branch7x7dbl_3", d, c7, k1x7, Square(1), p0x3);
  d = ConvRelu(b, name + ".branch7x7dbl_4", d, c7, k7x1, Square(1), p3x0);
  d = ConvRelu(b, name + ".branch7x7dbl_5", d, 192, k1x7, Square(1), p0x3);
  NodeId pool = Pool3x3(b, name + ".avgpool", x, PoolType::kAvg, 1, 1);
  NodeId bp = ConvRelu(b, name + ".branch_pool", pool, 192, Square(1));
  return b.AddIdentity(name, b.Concat({{b1}, {s}, {d}, {bp}}));
}

// 17x17 -> 8x8 reduction.
NodeId InceptionD(GraphBuilder& b, const std::string& name, NodeId x) {
  NodeId b3 = ConvRelu(b, name + ".branch3x3_1", x, 192, Square(1));
  b3 = ConvRelu(b, name + ".branch3x3_2", b3, 320, Square(3), Square(2));
  NodeId s = ConvRelu(b, name + ".branch7x7x3_1", x, 192, Square(1));
  s = ConvRelu(b, name + ".branch7x7x3_2", s, 192, k1x7, Square(1), p0x3);
  s = ConvRelu(b, name + ".branch7x7x3_3", s, 192, k7x1, Square(1), p3x0);
  s = ConvRelu(b, name + ".branch7x7x3_4", s, 192, Square(3), Square(2));
  NodeId pool = Pool3x3(b, name + ".maxpool", x, PoolType::kMax, 2, 0);
  return b.AddIdentity(name, b.Concat({{b3}, {s}, {pool}}));
}

// 8x8 with split 1x3 / 3x1 convolutions.
NodeId InceptionE(GraphBuilder& b, const std::string& name, NodeId x) {
  NodeId b1 = ConvRelu(b, name + ".branch1x1", x, 320, Square(1));
  NodeId t = ConvRelu(b, name + ".branch3x3_1", x, 384, Square(1));
  NodeId ta = ConvRelu(b, name + ".branch3x3_2a", t, 384, k1x3, Square(1), p0x1);
  NodeId tb = ConvRelu(b, name + ".branch3x3_2b", t, 384, k3x1, Square(1), p1x0);
  NodeId d = ConvRelu(b, name + ".branch3x3dbl_1", x, 448, Square(1));
  d = ConvRelu(b, name + ".branch3x3dbl_2", d, 384, Square(3), Square(1), Square(1));
  NodeId da = ConvRelu(b, name + ".branch3x3dbl_3a", d, 384, k1x3, Square(1), p0x1);
  NodeId db = ConvRelu(b, name + ".branch3x3dbl_3b", d, 384, k3x1, Square(1), p1x0);
  NodeId pool = Pool3x3(b, name + ".avgpool", x, PoolType::kAvg, 1, 1);
  NodeId bp = ConvRelu(b, name + ".branch_pool", pool, 192, Square(1));
  return b.AddIdentity(name, b.Concat({{b1}, {ta}, {tb}, {da}, {db}, {bp}}));
}

// ---- SqueezeNet v1.0 with complex bypass (Iandola et al. 2016) ----

// squeeze 1x1 -> expand 3x3 | expand 1x1, plus a bypass added to the
// concatenation: a 1x1 convolution when `conv_bypass`, else the input.
NodeId Fire(GraphBuilder& b, const std::string& name, NodeId x, int squeeze, int expand,
            bool conv_bypass) {
  NodeId s = ConvRelu(b, name + ".squeeze", x, squeeze, Square(1));
  NodeId e3 = ConvRelu(b, name + ".expand3x3", s, expand, Square(3), Square(1), Square(1));
  NodeId e1 = ConvRelu(b, name + ".expand1x1", s, expand, Square(1));
  NodeId cat = b.AddIdentity(name + ".concat", b.Concat({{e3}, {e1}}));
  NodeId bypass = conv_bypass ? ConvRelu(b, name + ".bypass", x, 2 * expand, Square(1)) : x;
  return b.AddIdentity(name, b.Sum({cat, bypass}));
}

}  // namespace

Graph BuildInceptionV3() {
  GraphBuilder b("inception_v3", Shape{3, 299, 299});
  b.BeginBlock();
  NodeId x = ConvRelu(b, "Conv2d_1a_3x3", GraphBuilder::kInput, 32, Square(3), Square(2));
  x = ConvRelu(b, "Conv2d_2a_3x3", x, 32, Square(3));
  x = ConvRelu(b, "Conv2d_2b_3x3", x, 64, Square(3), Square(1), Square(1));
  x = Pool3x3(b, "maxpool1", x, PoolType::kMax, 2, 0);
  x = ConvRelu(b, "Conv2d_3b_1x1", x, 80, Square(1));
  x = ConvRelu(b, "Conv2d_4a_3x3", x, 192, Square(3));
  x = Pool3x3(b, "maxpool2", x, PoolType::kMax, 2, 0);
  b.EndBlock();

  auto module = [&](auto&& build) {
    b.BeginBlock();
    x = build();
    b.EndBlock();
  };
  module([&] { return InceptionA(b, "Mixed_5b", x, 32); });
  module([&] { return InceptionA(b, "Mixed_5c", x, 64); });
  module([&] { return InceptionA(b, "Mixed_5d", x, 64); });
  module([&] { return InceptionB(b, "Mixed_6a", x); });
  module([&] { return InceptionC(b, "Mixed_6b", x, 128); });
  module([&] { return InceptionC(b, "Mixed_6c", x, 160); });
  module([&] { return InceptionC(b, "Mixed_6d", x, 160); });
  module([&] { return InceptionC(b, "Mixed_6e", x, 192); });
  module([&] { return InceptionD(b, "Mixed_7a", x); });
  module([&] { return InceptionE(b, "Mixed_7b", x); });
  module([&] { return InceptionE(b, "Mixed_7c", x); });
  module([&] { return b.AddGlobalAvgPool("avgpool", x); });
  return b.Finish();
}

Graph BuildSqueezeNet() {
  GraphBuilder b("squeezenet", Shape{3, 224, 224});
  NodeId x = GraphBuilder::kInput;
  auto block = [&](auto&& build) {
    b.BeginBlock();
    x = build();
    b.EndBlock();
  };
  auto max_pool = [&](const std::string& name) {
    return Pool3x3(b, name, x, PoolType::kMax, 2, 0);
  };
  block([&] {
    x = ConvRelu(b, "conv1", x, 96, Square(7), Square(2), Square(3));
    return max_pool("maxpool1");
  });
  block([&] { return Fire(b, "fire2", x, 16, 64, true); });
  block([&] { return Fire(b, "fire3", x, 16, 64, false); });
  block([&] { return Fire(b, "fire4", x, 32, 128, true); });
  block([&] { return max_pool("maxpool4"); });
  block([&] { return Fire(b, "fire5", x, 32, 128, false); });
  block([&] { return Fire(b, "fire6", x, 48, 192, true); });
  block([&] { return Fire(b, "fire7", x, 48, 192, false); });
  block([&] { return Fire(b, "fire8", x, 64, 256, true); });
  block([&] { return max_pool("maxpool8"); });
  block([&] { return Fire(b, "fire9", x, 64, 256, false); });
  block([&] {
    x = ConvRelu(b, "conv10", x, 1000, Square(1));
    return b.AddGlobalAvgPool("avgpool", x);
  });
  return b.Finish();
}

}  // namespace zoo

namespace {

// Seeds a parameterised name may give: any 32-bit value.
constexpr uint64_t kMaxSeed = 0xffffffffULL;

struct ZooModel {
  ZooEntry entry;
  Graph (*build)();
  //! Set for the generated models that take a seed ("NAME:s=SEED").
  Graph (*build_seeded)(uint64_t seed) = nullptr;
};

Graph RandWireCifar10(uint64_t seed) {
  return zoo::BuildRandWireCifar(
      {.classes = 10, .channels = zoo::kRandWireCifar10Channels, .seed = seed});
}
Graph RandWireCifar100(uint64_t seed) {
  return zoo::BuildRandWireCifar(
      {.classes = 100, .channels = zoo::kRandWireCifar100Channels, .seed = seed});
}

const std::vector<ZooModel>& Models() {
  static const std::vector<ZooModel> models = {
      {{"inception_v3", "Inception V3, 299x299: 13 blocks, 119 operators (conv-relu)"},
       zoo::BuildInceptionV3},
      {{"squeezenet", "SqueezeNet v1.0 with complex bypass, 224x224: 12 blocks, 50 operators"},
       zoo::BuildSqueezeNet},
      {{"nasnet", "NASNet-A large, 331x331: 1 block in 25 parts, 374 operators (relu-sepconv)"},
       zoo::BuildNasNetLarge},
      {{"randwire", "RandWire large (WS(16|32,4,0.75)), 224x224: 6 blocks, 120 operators"},
       zoo::BuildRandWireLarge},
      {{"randwire_cifar10",
        "RandWire CIFAR-10 (C=36, WS(32,4,0.75) seed 1; :s=SEED for others), 32x32: "
        "4 blocks, 70 operators",
        true},
       [] { return RandWireCifar10(1); },
       RandWireCifar10},
      {{"randwire_cifar100",
        "RandWire CIFAR-100 (C=44, WS(32,4,0.75) seed 1; :s=SEED for others), 32x32: "
        "4 blocks, 70 operators",
        true},
       [] { return RandWireCifar100(1); },
       RandWireCifar100},
      {{"darts_cell",
        "DARTS_V2 stems, first normal cell and the next cell's inputs, 224x224: 2 blocks, "
        "26 operators",
        true},
       [] { return zoo::BuildDartsImageNet({.first_cell_only = true}); }},
      {{"darts_imagenet",
        "DARTS_V2 ImageNet (C=48, 14 cells), 224x224: 3 blocks (cells in 15 parts), "
        "250 operators",
        true},
       [] { return zoo::BuildDartsImageNet({}); }},
  };
  return models;
}

const ZooModel* FindModel(const std::string& name) {
  for (const ZooModel& model : Models()) {
    if (model.entry.name == name) return &model;
  }
  return nullptr;
}

std::string KnownNames() {
  std::string known;
  for (const ZooModel& model : Models()) known += (known.empty() ? "" : ", ") + model.entry.name;
  return known;
}

// "NAME:s=SEED": NAME must take a seed; the only parameter is s, once.
Graph BuildParameterised(const std::string& full, const ZooModel& model,
                         const std::string& params) {
  const std::string where = "zoo model " + Quoted(full) + ": ";
  if (model.build_seeded == nullptr) {
    std::string seeded;
    for (const ZooModel& m : Models()) {
      if (m.build_seeded) seeded += (seeded.empty() ? "" : ", ") + m.entry.name;
    }
    throw Error(where + model.entry.name + " takes no parameters (s=SEED is taken by " + seeded +
                ")");
  }
  std::optional<uint64_t> seed;
  size_t begin = 0;
  while (begin <= params.size()) {
    const size_t end = std::min(params.find(',', begin), params.size());
    const std::string param = params.substr(begin, end - begin);
    const size_t eq = param.find('=');
    const std::string key = param.substr(0, eq);
    if (eq == std::string::npos || key != "s") {
      throw Error(where + "unknown parameter " + Quoted(param) + " (expected s=SEED)");
    }
    const std::string value = param.substr(eq + 1);
    uint64_t parsed = 0;
    const auto [rest, error] = std::from_chars(value.data(), value.data() + value.size(), parsed);
    if (value.empty() || error != std::errc() || rest != value.data() + value.size() ||
        parsed > kMaxSeed) {
      throw Error(where + "s: expected a seed from 0 to " + std::to_string(kMaxSeed) + ", got " +
                  Quoted(value));
    }
    if (seed) throw Error(where + "s given twice");
    seed = parsed;
    begin = end + 1;
  }
  Graph graph = model.build_seeded(*seed);
  graph.name = full;
  return graph;
}

}  // namespace

const std::vector<ZooEntry>& ZooModels() {
  static const std::vector<ZooEntry> entries = [] {
    std::vector<ZooEntry> result;
    for (const ZooModel& model : Models()) result.push_back(model.entry);
    return result;
  }();
  return entries;
}

bool IsZooModelName(const std::string& name) {
  return FindModel(name.substr(0, name.find(':'))) != nullptr;
}

Graph BuildZooModel(const std::string& name) {
  const size_t colon = name.find(':');
  const ZooModel* model = FindModel(name.substr(0, colon));
  if (model == nullptr) {
    throw Error("unknown zoo model " + Quoted(name) + " (known: " + KnownNames() + ")");
  }
  if (colon == std::string::npos) return model->build();
  return BuildParameterised(name, *model, name.substr(colon + 1));
}

}  // namespace ios
