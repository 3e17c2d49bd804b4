// DARTS on ImageNet (Liu et al. 2019, "DARTS: Differentiable Architecture
// Search"), built as the authors' PyTorch NetworkImageNet runs it, so the
// node order is the order a framework executes it in (the baseline the
// Serenity paper compares against).
//
// Two departures, neither changing a shape or the graph's structure beyond
// what the IR requires: each ReLU-conv-BN is one relu -> conv operator with
// the batch norm folded away, and FactorizedReduce is two relu -> 1x1/2
// convolutions concatenated; the real one runs its second convolution on
// the input shifted by one pixel (x[:, :, 1:, 1:]), which for an even size
// gives the same output size, and applies its relu once.
#include "common/zoo_darts.h"

#include <stdexcept>
#include <string>
#include <utility>

#include "common/error.h"

namespace ios::zoo {

const DartsGenotype& DartsV2() {
  using enum DartsOp;
  static const DartsGenotype genotype = {
      .normal = {{kSepConv3x3, 0},
                 {kSepConv3x3, 1},
                 {kSepConv3x3, 0},
                 {kSepConv3x3, 1},
                 {kSepConv3x3, 1},
                 {kSkip, 0},
                 {kSkip, 0},
                 {kDilConv3x3, 2}},
      .normal_concat = {2, 3, 4, 5},
      .reduce = {{kMaxPool3x3, 0},
                 {kMaxPool3x3, 1},
                 {kSkip, 2},
                 {kMaxPool3x3, 1},
                 {kMaxPool3x3, 0},
                 {kSkip, 2},
                 {kSkip, 2},
                 {kMaxPool3x3, 1}},
      .reduce_concat = {2, 3, 4, 5},
  };
  return genotype;
}

namespace {

void CheckCell(const std::vector<DartsEdge>& edges, const std::vector<int>& concat,
               const char* which) {
  const std::string where = std::string("DARTS genotype: ") + which + " cell: ";
  if (edges.empty() || edges.size() % 2 != 0) {
    throw Error(where + "expected two edges per step, got " + std::to_string(edges.size()));
  }
  const int states = 2 + static_cast<int>(edges.size()) / 2;
  for (size_t i = 0; i < edges.size(); ++i) {
    const int step = static_cast<int>(i) / 2;
    if (edges[i].input < 0 || edges[i].input >= 2 + step) {
      throw Error(where + "edge " + std::to_string(i) + " reads state " +
                  std::to_string(edges[i].input) + " (expected 0 to " + std::to_string(1 + step) +
                  ", the states before its step)");
    }
  }
  if (concat.empty()) throw Error(where + "concatenates no state");
  for (int s : concat) {
    if (s < 0 || s >= states) {
      throw Error(where + "concatenates state " + std::to_string(s) + " (expected 0 to " +
                  std::to_string(states - 1) + ")");
    }
  }
}

class DartsBuilder {
 public:
  DartsBuilder(GraphBuilder& b, const DartsGenotype& genotype) : b_(b), genotype_(genotype) {}

  NodeId ReluConv(const std::string& name, NodeId x, int channels, int kernel, int stride) {
    return b_.AddReluConv(name, b_.Of(x), channels, Square(kernel), Square(stride),
                          Square(kernel / 2));
  }

  // Halves the size: two relu -> 1x1/2 convolutions of half the channels,
  // concatenated.
  NodeId FactorizedReduce(const std::string& name, NodeId x, int channels) {
    const NodeId a = ReluConv(name + ".conv_1", x, channels / 2, 1, 2);
    const NodeId c = ReluConv(name + ".conv_2", x, channels / 2, 1, 2);
    return b_.AddIdentity(name, b_.Concat({{a}, {c}}));
  }

  // The cell's two inputs brought to `channels` (and s0 to s1's size when
  // the previous cell reduced).
  std::pair<NodeId, NodeId> Preprocess(const std::string& name, NodeId s0, NodeId s1, int channels,
                                       bool reduction_prev) {
    const NodeId p0 = reduction_prev ? FactorizedReduce(name + ".preprocess0", s0, channels)
                                     : ReluConv(name + ".preprocess0", s0, channels, 1, 1);
    const NodeId p1 = ReluConv(name + ".preprocess1", s1, channels, 1, 1);
    return {p0, p1};
  }

  // One cell: each step sums two operations on earlier states; the output
  // concatenates the listed states.
  NodeId Cell(const std::string& name, NodeId s0, NodeId s1, int channels, bool reduction,
              bool reduction_prev) {
    const auto [p0, p1] = Preprocess(name, s0, s1, channels, reduction_prev);
    const std::vector<DartsEdge>& edges = reduction ? genotype_.reduce : genotype_.normal;
    const std::vector<int>& concat = reduction ? genotype_.reduce_concat : genotype_.normal_concat;
    std::vector<NodeId> states = {p0, p1};
    for (size_t i = 0; i + 1 < edges.size(); i += 2) {
      const std::string state = name + ".state" + std::to_string(states.size());
      NodeId h[2];
      for (int side = 0; side < 2; ++side) {
        const DartsEdge& e = edges[i + side];
        const int stride = reduction && e.input < 2 ? 2 : 1;
        h[side] =
            Op(state + (side == 0 ? ".left" : ".right"), e.op, states[e.input], channels, stride);
      }
      states.push_back(b_.AddIdentity(state, b_.Sum({h[0], h[1]})));
    }
    Inputs output;
    for (int s : concat) output.push_back(b_.Of(states[s]).front());
    return b_.AddIdentity(name, std::move(output));
  }

 private:
  NodeId Op(const std::string& name, DartsOp op, NodeId x, int channels, int stride) {
    switch (op) {
      case DartsOp::kSepConv3x3: {
        // Two relu -> depthwise -> pointwise convolutions, the stride in the first.
        const NodeId y = b_.AddReluSepConv(name + ".sep1", b_.Of(x), channels, Square(3),
                                           Square(stride), Square(1));
        return b_.AddReluSepConv(name + ".sep2", b_.Of(y), channels, Square(3), Square(1),
                                 Square(1));
      }
      case DartsOp::kDilConv3x3:
        return b_.AddReluSepConv(name + ".dil", b_.Of(x), channels, Square(3), Square(stride),
                                 Square(2), Square(2));
      case DartsOp::kMaxPool3x3:
        return b_.AddPool(name + ".pool", b_.Of(x), PoolType::kMax, Square(3), Square(stride),
                          Square(1));
      case DartsOp::kSkip:
        // The state itself joins the step's sum; across a reduction it must
        // shrink first.
        return stride == 1 ? x : FactorizedReduce(name + ".reduce", x, channels);
    }
    throw std::logic_error("zoo: unknown DARTS operation");
  }

  GraphBuilder& b_;
  const DartsGenotype& genotype_;
};

}  // namespace

Graph BuildDartsImageNet(const DartsOptions& options, const DartsGenotype& genotype) {
  const int c = options.channels;
  if (c <= 0 || c % 2 != 0) {
    throw Error("DARTS: channels must be a positive even number, got " + std::to_string(c));
  }
  const int min_layers = options.first_cell_only ? 2 : 3;
  if (options.layers < min_layers) {
    throw Error("DARTS: layers must be at least " + std::to_string(min_layers) + ", got " +
                std::to_string(options.layers));
  }
  CheckCell(genotype.normal, genotype.normal_concat, "normal");
  CheckCell(genotype.reduce, genotype.reduce_concat, "reduction");

  GraphBuilder b(options.first_cell_only ? "darts_cell" : "darts_imagenet", Shape{3, 224, 224});
  DartsBuilder cells(b, genotype);

  b.BeginBlock();
  NodeId s0 = b.AddConv("stem0.conv1", b.Of(GraphBuilder::kInput), c / 2, Square(3), Square(2),
                        Square(1), Activation::kRelu);
  s0 = b.AddConv("stem0.conv2", b.Of(s0), c, Square(3), Square(2), Square(1), Activation::kNone);
  b.EndBlock();

  // Cell k reads cells k-1 and k-2: no cut vertex between cells, so they
  // share a block, with a part per cell as NASNet's.
  b.BeginBlock();
  NodeId s1 = cells.ReluConv("stem1", s0, c, 3, 2);
  b.EndPart();
  int channels = c;
  bool reduction_prev = true;  // stem1 halved the size after s0
  const int cell_count = options.first_cell_only ? 1 : options.layers;
  for (int i = 0; i < cell_count; ++i) {
    const bool reduction = i == options.layers / 3 || i == 2 * options.layers / 3;
    if (reduction) channels *= 2;
    const NodeId out =
        cells.Cell("cell_" + std::to_string(i), s0, s1, channels, reduction, reduction_prev);
    b.EndPart();
    reduction_prev = reduction;
    s0 = s1;
    s1 = out;
  }
  if (options.first_cell_only) {
    // Cell 1's preprocessing: its readers of cell 0's output, then one exit
    // so the block has a single sink.
    const auto [p0, p1] = cells.Preprocess("cell_1", s0, s1, channels, reduction_prev);
    b.AddIdentity("cell_1.states", b.Concat({{p0}, {p1}}));
    b.EndPart();
    b.EndBlock();
    return b.Finish();
  }
  b.EndBlock();

  b.BeginBlock();
  b.AddGlobalAvgPool("avgpool", s1);
  b.EndBlock();
  return b.Finish();
}

}  // namespace ios::zoo
