// NASNet-A large (Zoph et al. 2018; "6 @ 4032", 331x331) as the IOS
// reference implementation builds it: every separable convolution is one
// relu -> depthwise -> pointwise operator, every 1x1 projection one
// relu -> conv operator, the whole network one block. Scheduling that block
// in one piece is intractable, so it is cut into 25 parts at the cell
// outputs: the stem convolution, the two stem cells, the 18 normal and
// 2 reduction cells, the final ReLU and the global pool.
//
// The wiring is the reference's, also where it may differ from other NASNet
// implementations; tests/common/zoo_test.cc checks it operator for operator
// against the reference's export.
#include <string>

#include "common/zoo_builder.h"

namespace ios::zoo {
namespace {

class NasNetBuilder {
 public:
  explicit NasNetBuilder(GraphBuilder& b) : b_(b) {}

  // Two separable convolutions; the first keeps x's channels and applies
  // the stride (the stem variant goes to `out_channels` at once).
  NodeId Separable(const std::string& name, NodeId x, int out_channels, int kernel, int stride,
                   bool stem = false) {
    const int first_channels = stem ? out_channels : b_.shape(x).c;
    NodeId y = b_.AddReluSepConv(name + ".sep1", b_.Of(x), first_channels, Square(kernel),
                                 Square(stride), Square(kernel / 2));
    return b_.AddReluSepConv(name + ".sep2", b_.Of(y), out_channels, Square(kernel), Square(1),
                             Square(kernel / 2));
  }
  NodeId Project(const std::string& name, NodeId x, int out_channels, int stride = 1) {
    return b_.AddReluConv(name, b_.Of(x), out_channels, Square(1), Square(stride), Square(0));
  }
  NodeId Pool(const std::string& name, NodeId x, PoolType type, int stride) {
    return b_.AddPool(name, b_.Of(x), type, Square(3), Square(stride), Square(1));
  }
  NodeId Add(const std::string& name, NodeId a, NodeId c) {
    return b_.AddIdentity(name, b_.Sum({a, c}));
  }

  // Stem cell 0 (stride 2), from the stem convolution's output x.
  NodeId Stem0(const std::string& n, NodeId x, int filters) {
    NodeId x1 = Project(n + ".conv1x1", x, filters);
    NodeId c0l = Separable(n + ".comb0_left", x1, filters, 5, 2);
    NodeId c0r = Separable(n + ".comb0_right", x, filters, 7, 2, /*stem=*/true);
    NodeId c0 = Add(n + ".comb0", c0l, c0r);
    NodeId c1l = Pool(n + ".comb1_left", x1, PoolType::kMax, 2);
    NodeId c1r = Separable(n + ".comb1_right", x, filters, 7, 2, /*stem=*/true);
    NodeId c1 = Add(n + ".comb1", c1l, c1r);
    NodeId c2l = Pool(n + ".comb2_left", x1, PoolType::kAvg, 2);
    NodeId c2r = Separable(n + ".comb2_right", x, filters, 5, 2, /*stem=*/true);
    NodeId c3r = Pool(n + ".comb3_right", c0, PoolType::kAvg, 1);
    NodeId c4l = Separable(n + ".comb4_left", c0, filters, 3, 1);
    NodeId c4r = Pool(n + ".comb4_right", x1, PoolType::kMax, 2);
    return b_.AddIdentity(n, b_.Concat({{c1}, {c2l, c2r}, {c3r, c0}, {c4l, c4r}}));
  }

  // Stem cell 1 (stride 2): x is stem cell 0's output, prev the stem conv's.
  NodeId Stem1(const std::string& n, NodeId x, NodeId prev, int filters) {
    NodeId left = Project(n + ".conv1x1", x, filters);
    NodeId r1 = Project(n + ".path_1", prev, filters / 2, 2);
    NodeId r2 = Project(n + ".path_2", prev, filters / 2, 2);
    NodeId right = Add(n + ".path", r1, r2);
    const Reduction c = ReductionCombinations(n, left, right, filters);
    // The reference's stem concatenates comb1 whole and lists comb3 first.
    return b_.AddIdentity(n, b_.Concat({{c.c1}, {c.c2l, c.c2r}, {c.c3r, c.c1}, {c.c4l, c.c4r}}));
  }

  // The five combinations of a reduction cell, all with stride 2 but comb3.
  // `a` feeds the pools and comb0's 5x5, `b` the 7x7s and comb2's 5x5.
  struct Reduction {
    NodeId c1l, c1r, c1, c2l, c2r, c3r, c4l, c4r;
  };
  Reduction ReductionCombinations(const std::string& n, NodeId a, NodeId b, int filters) {
    Reduction r;
    NodeId c0l = Separable(n + ".comb0_left", a, filters, 5, 2);
    NodeId c0r = Separable(n + ".comb0_right", b, filters, 7, 2);
    NodeId c0 = Add(n + ".comb0", c0l, c0r);
    r.c1l = Pool(n + ".comb1_left", a, PoolType::kMax, 2);
    r.c1r = Separable(n + ".comb1_right", b, filters, 7, 2);
    r.c1 = Add(n + ".comb1", r.c1l, r.c1r);
    r.c2l = Pool(n + ".comb2_left", a, PoolType::kAvg, 2);
    r.c2r = Separable(n + ".comb2_right", b, filters, 5, 2);
    r.c3r = Pool(n + ".comb3_right", c0, PoolType::kAvg, 1);
    r.c4l = Separable(n + ".comb4_left", c0, filters, 3, 1);
    r.c4r = Pool(n + ".comb4_right", a, PoolType::kMax, 2);
    return r;
  }

  // The first normal cell after a reduction: prev has twice x's spatial
  // size and is brought down by two strided 1x1 paths, concatenated.
  NodeId FirstCell(const std::string& n, NodeId x, NodeId prev, int left_filters,
                   int right_filters) {
    NodeId l1 = Project(n + ".path_1", prev, left_filters, 2);
    NodeId l2 = Project(n + ".path_2", prev, left_filters, 2);
    NodeId left = b_.AddIdentity(n + ".path", b_.Concat({{l1}, {l2}}));
    NodeId right = Project(n + ".conv1x1", x, right_filters);
    return NormalCombinations(n, left, right, right_filters, right_filters, /*first=*/true);
  }

  NodeId NormalCell(const std::string& n, NodeId x, NodeId prev, int left_filters,
                    int right_filters) {
    NodeId left = Project(n + ".conv_prev_1x1", prev, left_filters);
    NodeId right = Project(n + ".conv1x1", x, right_filters);
    return NormalCombinations(n, left, right, left_filters, right_filters, /*first=*/false);
  }

  // Reduction cell (stride 2).
  NodeId ReductionCell(const std::string& n, NodeId x, NodeId prev, int filters) {
    NodeId left = Project(n + ".conv_prev_1x1", prev, filters);
    NodeId right = Project(n + ".conv1x1", x, filters);
    const Reduction c = ReductionCombinations(n, right, left, filters);
    return b_.AddIdentity(
        n, b_.Concat({{c.c1l, c.c1r}, {c.c2l, c.c2r}, {c.c1, c.c3r}, {c.c4l, c.c4r}}));
  }

 private:
  // The five combinations of a normal cell. A first cell differs in three
  // ways: its comb0_right reads the right input, every branch has
  // right_filters, and its output also concatenates the left input.
  NodeId NormalCombinations(const std::string& n, NodeId left, NodeId right, int left_filters,
                            int right_filters, bool first) {
    NodeId c0l = Separable(n + ".comb0_left", right, right_filters, 5, 1);
    NodeId c0r = Separable(n + ".comb0_right", first ? right : left, left_filters, 3, 1);
    NodeId c1l = Separable(n + ".comb1_left", left, left_filters, 5, 1);
    NodeId c1r = Separable(n + ".comb1_right", left, left_filters, 3, 1);
    NodeId c2l = Pool(n + ".comb2_left", right, PoolType::kAvg, 1);
    NodeId c3l = Pool(n + ".comb3_left", left, PoolType::kAvg, 1);
    NodeId c3r = Pool(n + ".comb3_right", left, PoolType::kAvg, 1);
    NodeId c4l = Separable(n + ".comb4_left", right, right_filters, 3, 1);
    if (first) {
      return b_.AddIdentity(
          n, b_.Concat({{left}, {c0l, c0r}, {c1l, c1r}, {c2l, left}, {c3l, c3r}, {c4l, right}}));
    }
    return b_.AddIdentity(
        n, b_.Concat({{c0l, c0r}, {c1l, c1r}, {c2l, left}, {c3l, c3r}, {c4l, right}}));
  }

  GraphBuilder& b_;
};

}  // namespace

Graph BuildNasNetLarge() {
  constexpr int kStemFilters = 96;
  constexpr int kFilters = 168;  // penultimate filters 4032 = 24 * 168
  GraphBuilder b("nasnet", Shape{3, 331, 331});
  NasNetBuilder cells(b);
  b.BeginBlock();

  // Each cell output ends a part; `x` is the latest cell output, `prev` the
  // one before it (a cell reads both).
  NodeId prev = b.AddConv("conv0", b.Of(GraphBuilder::kInput), kStemFilters, Square(3), Square(2),
                          Square(0), Activation::kNone);
  b.EndPart();
  NodeId x = cells.Stem0("cell_stem_0", prev, kFilters / 4);
  b.EndPart();
  auto next = [&](NodeId out) {
    b.EndPart();
    prev = x;
    x = out;
  };
  next(cells.Stem1("cell_stem_1", x, prev, kFilters / 2));

  // Three stacks of six cells (a first cell then five normal cells),
  // separated by reduction cells that double the filters.
  int cell = 0;
  for (int stack = 0; stack < 3; ++stack) {
    const int filters = kFilters << stack;
    if (stack > 0) {
      // The first cell after a reduction reads, as its `prev`, the output
      // of the cell before the reduction (not the one just before it).
      NodeId before_reduction = prev;
      next(cells.ReductionCell("reduction_cell_" + std::to_string(stack - 1), x, prev, filters));
      prev = before_reduction;
    }
    next(cells.FirstCell("cell_" + std::to_string(cell++), x, prev, filters / 2, filters));
    for (int i = 0; i < 5; ++i) {
      next(cells.NormalCell("cell_" + std::to_string(cell++), x, prev, filters, filters));
    }
  }

  NodeId relu = b.AddRelu("relu", b.Of(x));
  b.EndPart();
  b.AddGlobalAvgPool("avgpool", relu);
  b.EndPart();
  b.EndBlock();
  return b.Finish();
}

}  // namespace ios::zoo
