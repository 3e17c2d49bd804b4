// The ONNX importer on Swin's shifted-window attention as torchvision 0.14
// exports it (onnx/onnx_windows.cc): torch.roll as Slices and Concats, the
// window partition's Reshape / Transpose / Reshape and its reverse, the
// q, k, v Gathers, the relative position bias and the shifted windows'
// mask. The expected output is computed here from those operators' own
// definitions (the mask from torchvision's region slices), not from the
// IR's window_attention.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "common/op_kinds.h"
#include "exec/weights.h"
#include "onnx/onnx_import.h"
#include "tests/onnx/onnx_builder.h"
#include "tests/onnx/onnx_import_testing.h"

namespace ios::onnx_import {
namespace {
namespace tiny_swin {

using ::testing::HasSubstr;
using testing::IntAttr;
using testing::IntsAttr;
using testing::OnnxBuilder;

// A 4 x 4 map of 2 features, windows of 2 (4 windows of 4 tokens), one head.
constexpr int kC = 2, kSide = 4, kWin = 2, kTokens = kWin * kWin, kWindows = 4;
constexpr int64_t kEnd = int64_t{1} << 62;

struct Weights {
  std::vector<float> qkv = exec::SeededValues(kC * 3 * kC, 21);  // [C, 3C]
  std::vector<float> qkv_bias = exec::SeededValues(3 * kC, 22);
  std::vector<float> bias = exec::SeededValues(kTokens * kTokens, 23);  // [1, 1, N, N]
  std::vector<float> proj = exec::SeededValues(kC * kC, 24);            // [C, C]
  std::vector<float> proj_bias = exec::SeededValues(kC, 25);
};

// torchvision's mask: region labels by slices of the rolled map, -100
// between tokens of a window whose labels differ.
std::vector<float> SwinMask(int shift) {
  int label[kSide][kSide];
  const int cuts[4] = {0, kSide - kWin, kSide - shift, kSide};
  int count = 0;
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 3; ++j, ++count) {
      for (int y = cuts[i]; y < cuts[i + 1]; ++y) {
        for (int x = cuts[j]; x < cuts[j + 1]; ++x) label[y][x] = count;
      }
    }
  }
  std::vector<float> mask;
  for (int w = 0; w < kWindows; ++w) {
    for (int a = 0; a < kTokens; ++a) {
      for (int b = 0; b < kTokens; ++b) {
        const int ya = w / 2 * kWin + a / kWin, xa = w % 2 * kWin + a % kWin;
        const int yb = w / 2 * kWin + b / kWin, xb = w % 2 * kWin + b % kWin;
        mask.push_back(label[ya][xa] != label[yb][xb] ? -100.0f : 0.0f);
      }
    }
  }
  return mask;
}

std::string Roll(OnnxBuilder& b, std::string x, int by) {
  for (const int axis : {1, 2}) {
    const std::string tail = b.Node("Slice", {x, b.Ints({by}), b.Ints({kEnd}), b.Ints({axis})});
    const std::string head = b.Node("Slice", {x, b.Ints({0}), b.Ints({by}), b.Ints({axis})});
    x = b.Node("Concat", {tail, head}, {IntAttr("axis", axis)});
  }
  return x;
}

// One Swin block's attention with its residual, channels-last in between.
std::string TinySwin(OnnxBuilder& b, const Weights& w, int shift, std::vector<float> mask) {
  const std::string x = b.Node("Transpose", {"input"}, {IntsAttr("perm", {0, 2, 3, 1})});
  std::string y = shift > 0 ? Roll(b, x, shift) : x;
  y = b.Node("Reshape", {y, b.Ints({1, kSide / kWin, kWin, kSide / kWin, kWin, kC})});
  y = b.Node("Transpose", {y}, {IntsAttr("perm", {0, 1, 3, 2, 4, 5})});
  y = b.Node("Reshape", {y, b.Ints({kWindows, kTokens, kC})});
  y = b.Node("Add", {b.Node("MatMul", {y, b.Weight({kC, 3 * kC}, w.qkv)}),
                     b.Weight({3 * kC}, w.qkv_bias)});
  y = b.Node("Reshape", {y, b.Ints({kWindows, kTokens, 3, 1, kC})});
  y = b.Node("Transpose", {y}, {IntsAttr("perm", {2, 0, 3, 1, 4})});
  std::string qkv[3];
  for (int i = 0; i < 3; ++i) qkv[i] = b.Node("Gather", {y, b.IntScalar(i)}, {IntAttr("axis", 0)});
  const std::string q = b.Node("Mul", {qkv[0], b.FloatConstant(1 / std::sqrt(float{kC}))});
  const std::string k = b.Node("Transpose", {qkv[1]}, {IntsAttr("perm", {0, 1, 3, 2})});
  std::string s = b.Node("MatMul", {q, k});
  s = b.Node("Add", {s, b.Weight({1, 1, kTokens, kTokens}, w.bias)});
  if (!mask.empty()) {
    s = b.Node("Reshape", {s, b.Ints({1, kWindows, 1, kTokens, kTokens})});
    s = b.Node("Add", {s, b.Weight({1, kWindows, 1, kTokens, kTokens}, mask)});
    s = b.Node("Reshape", {s, b.Ints({-1, 1, kTokens, kTokens})});
  }
  s = b.Node("Softmax", {s}, {IntAttr("axis", -1)});
  std::string o = b.Node("MatMul", {s, qkv[2]});
  o = b.Node("Transpose", {o}, {IntsAttr("perm", {0, 2, 1, 3})});
  o = b.Node("Reshape", {o, b.Ints({kWindows, kTokens, kC})});
  o = b.Node("Add",
             {b.Node("MatMul", {o, b.Weight({kC, kC}, w.proj)}), b.Weight({kC}, w.proj_bias)});
  o = b.Node("Reshape", {o, b.Ints({1, kSide / kWin, kSide / kWin, kWin, kWin, kC})});
  o = b.Node("Transpose", {o}, {IntsAttr("perm", {0, 1, 3, 2, 4, 5})});
  o = b.Node("Reshape", {o, b.Ints({1, kSide, kSide, kC})});
  if (shift > 0) o = Roll(b, o, kSide - shift);
  o = b.Node("Add", {o, x});
  return b.Node("Transpose", {o}, {IntsAttr("perm", {0, 3, 1, 2})});
}

// The same from the definitions: roll, windows, attention, back.
std::vector<float> Expected(const Weights& w, int shift, const std::vector<float>& input) {
  const auto at = [&](int c, int y, int x) { return double{input[(c * kSide + y) * kSide + x]}; };
  const std::vector<float> mask = shift > 0 ? SwinMask(shift) : std::vector<float>{};
  std::vector<float> out(input.size());
  for (int win = 0; win < kWindows; ++win) {
    int py[kTokens], px[kTokens];  // each token's pixel in the unrolled map
    double qkv[kTokens][3 * kC];
    for (int t = 0; t < kTokens; ++t) {
      py[t] = (win / 2 * kWin + t / kWin + shift) % kSide;
      px[t] = (win % 2 * kWin + t % kWin + shift) % kSide;
      for (int o = 0; o < 3 * kC; ++o) {
        double sum = w.qkv_bias[o];
        for (int c = 0; c < kC; ++c) sum += at(c, py[t], px[t]) * w.qkv[c * 3 * kC + o];
        qkv[t][o] = sum;
      }
    }
    for (int i = 0; i < kTokens; ++i) {
      double p[kTokens], total = 0;
      for (int j = 0; j < kTokens; ++j) {
        double dot = 0;
        for (int c = 0; c < kC; ++c) dot += qkv[i][c] * qkv[j][kC + c];
        const double m = mask.empty() ? 0 : mask[(win * kTokens + i) * kTokens + j];
        total += p[j] = std::exp(dot / std::sqrt(double{kC}) + w.bias[i * kTokens + j] + m);
      }
      double attended[kC];
      for (int c = 0; c < kC; ++c) {
        attended[c] = 0;
        for (int j = 0; j < kTokens; ++j) attended[c] += p[j] / total * qkv[j][2 * kC + c];
      }
      for (int o = 0; o < kC; ++o) {
        double sum = w.proj_bias[o];
        for (int c = 0; c < kC; ++c) sum += attended[c] * w.proj[c * kC + o];
        out[(o * kSide + py[i]) * kSide + px[i]] = static_cast<float>(sum + at(o, py[i], px[i]));
      }
    }
  }
  return out;
}

int CountWindowAttention(const ImportedModel& model) {
  int count = 0;
  for (const Node& node : model.graph.nodes) {
    if (node.op.kind != OpKind::kRegistered) continue;
    if (node.op.registered.kind != RegisteredKind::kWindowAttention) continue;
    ++count;
  }
  return count;
}

TEST(OnnxWindowsTest, ShiftedAndPlainWindowAttentionImportAsOneOperatorAndCompute) {
  const Weights w;
  const std::vector<float> input = exec::SeededValues(kC * kSide * kSide, 26);
  for (const int shift : {0, 1}) {
    OnnxBuilder b(kC, kSide, kSide);
    const ImportedModel model = ImportOnnx(
        b.Bytes(TinySwin(b, w, shift, shift > 0 ? SwinMask(shift) : std::vector<float>{})),
        "swin.onnx");
    // input, q/k/v, window_attention, projection, residual: rolls and windows are views.
    EXPECT_EQ(model.graph.nodes.size(), 5u) << shift;
    ASSERT_EQ(CountWindowAttention(model), 1) << shift;
    for (const Node& node : model.graph.nodes) {
      if (node.op.kind == OpKind::kRegistered) {
        EXPECT_EQ(RegisteredKeyText(node.op.registered),
                  "window_attention(heads=1,window=2,shift=" + std::to_string(shift) +
                      ",grid=0,scale=0)");
      }
    }
    const std::vector<float> out = RunImported(model, input);
    const std::vector<float> expected = Expected(w, shift, input);
    ASSERT_EQ(out.size(), expected.size());
    for (size_t i = 0; i < out.size(); ++i) EXPECT_NEAR(out[i], expected[i], 1e-5) << shift;
  }
}

TEST(OnnxWindowsTest, AMaskOtherThanTheShiftsIsRefused) {
  const Weights w;
  std::vector<float> mask = SwinMask(1);
  mask[5] = mask[5] == 0 ? -100.0f : 0.0f;
  OnnxBuilder b(kC, kSide, kSide);
  EXPECT_THAT(Refusal(b.Bytes(TinySwin(b, w, 1, mask))),
              HasSubstr("is not Swin's for a shift of 1"));
  OnnxBuilder half(kC, kSide, kSide);
  const std::string x = half.Node("Transpose", {"input"}, {IntsAttr("perm", {0, 2, 3, 1})});
  const std::string tail =
      half.Node("Slice", {x, half.Ints({1}), half.Ints({kEnd}), half.Ints({1})});
  EXPECT_THAT(Refusal(half.Bytes(half.Node("Concat", {tail, tail}, {IntAttr("axis", 1)}))),
              HasSubstr("only both halves of one roll"));
}

}  // namespace tiny_swin

namespace tiny_maxvit {

using testing::IntAttr;
using testing::IntsAttr;
using testing::OnnxBuilder;

// A 2 x 4 x 4 channels-first map in blocks of 2 (4 windows of 4 tokens),
// one head of 2; k scaled by 0.3 (MaxViT's 1/sqrt(C) is not the standard).
constexpr int kC = 2, kSide = 4, kP = 2, kN = 4, kWindows = 4;
constexpr float kScale = 0.3f;

::onnx::AttributeProto Equation(const std::string& text) {
  ::onnx::AttributeProto a;
  a.set_name("equation");
  a.set_type(::onnx::AttributeProto::STRING);
  a.set_s(text);
  return a;
}

struct Weights {
  std::vector<float> qkv = exec::SeededValues(kC * 3 * kC, 31);
  std::vector<float> qkv_bias = exec::SeededValues(3 * kC, 32);
  std::vector<float> bias = exec::SeededValues(kN * kN, 33);
};

// MaxViT's partition, attention and reverse as torchvision exports them;
// `grid` swaps windows and tokens in between (its grid attention).
std::string TinyMaxVit(OnnxBuilder& b, const Weights& w, bool grid) {
  std::string x = b.Node("Reshape", {"input", b.Ints({1, kC, kSide / kP, kP, kSide / kP, kP})});
  x = b.Node("Transpose", {x}, {IntsAttr("perm", {0, 2, 4, 3, 5, 1})});
  x = b.Node("Reshape", {x, b.Ints({1, kWindows, kN, kC})});
  if (grid) x = b.Node("Transpose", {x}, {IntsAttr("perm", {0, 2, 1, 3})});
  std::string y = b.Node("Add", {b.Node("MatMul", {x, b.Weight({kC, 3 * kC}, w.qkv)}),
                                 b.Weight({3 * kC}, w.qkv_bias)});
  std::string part[3];
  for (int i = 0; i < 3; ++i) {
    part[i] = b.Node("Slice", {y, b.Ints({i * kC}), b.Ints({(i + 1) * kC}), b.Ints({-1})});
    part[i] = b.Node("Reshape", {part[i], b.Ints({1, kWindows, kN, 1, kC})});
    part[i] = b.Node("Transpose", {part[i]}, {IntsAttr("perm", {0, 1, 3, 2, 4})});
  }
  const std::string k = b.Node("Mul", {part[1], b.FloatConstant(kScale)});
  std::string s = b.Node("Einsum", {part[0], k}, {Equation("BGHID,BGHJD->BGHIJ")});
  s = b.Node("Add", {s, b.Weight({1, kN, kN}, w.bias)});
  s = b.Node("Softmax", {s}, {IntAttr("axis", -1)});
  std::string o = b.Node("Einsum", {s, part[2]}, {Equation("BGHIJ,BGHJD->BGHID")});
  o = b.Node("Transpose", {o}, {IntsAttr("perm", {0, 1, 3, 2, 4})});
  o = b.Node("Reshape", {o, b.Ints({1, kWindows, kN, kC})});
  if (grid) o = b.Node("Transpose", {o}, {IntsAttr("perm", {0, 2, 1, 3})});
  o = b.Node("Reshape", {o, b.Ints({1, kSide / kP, kSide / kP, kP, kP, kC})});
  o = b.Node("Transpose", {o}, {IntsAttr("perm", {0, 5, 1, 3, 2, 4})});
  return b.Node("Reshape", {o, b.Ints({1, kC, kSide, kSide})});
}

// The same from the definitions: block (wy, wx)'s token (ty, tx) is pixel
// (2 wy + ty, 2 wx + tx); a grid window is one offset inside every block.
std::vector<float> Expected(const Weights& w, bool grid, const std::vector<float>& input) {
  std::vector<float> out(input.size());
  for (int win = 0; win < kWindows; ++win) {
    int py[kN], px[kN];
    double qkv[kN][3 * kC];
    for (int t = 0; t < kN; ++t) {
      const int block = grid ? t : win, offset = grid ? win : t;
      py[t] = block / 2 * kP + offset / kP;
      px[t] = block % 2 * kP + offset % kP;
      for (int o = 0; o < 3 * kC; ++o) {
        double sum = w.qkv_bias[o];
        for (int c = 0; c < kC; ++c) {
          sum += double{input[(c * kSide + py[t]) * kSide + px[t]]} * w.qkv[c * 3 * kC + o];
        }
        qkv[t][o] = sum;
      }
    }
    for (int i = 0; i < kN; ++i) {
      double p[kN], total = 0;
      for (int j = 0; j < kN; ++j) {
        double dot = 0;
        for (int c = 0; c < kC; ++c) dot += qkv[i][c] * qkv[j][kC + c] * kScale;
        total += p[j] = std::exp(dot + w.bias[i * kN + j]);
      }
      for (int c = 0; c < kC; ++c) {
        double sum = 0;
        for (int j = 0; j < kN; ++j) sum += p[j] / total * qkv[j][2 * kC + c];
        out[(c * kSide + py[i]) * kSide + px[i]] = static_cast<float>(sum);
      }
    }
  }
  return out;
}

TEST(OnnxMaxVitTest, BlockAndGridAttentionImportAsOneOperatorAndCompute) {
  const Weights w;
  const std::vector<float> input = exec::SeededValues(kC * kSide * kSide, 34);
  for (const bool grid : {false, true}) {
    OnnxBuilder b(kC, kSide, kSide);
    const ImportedModel model = ImportOnnx(b.Bytes(TinyMaxVit(b, w, grid)), "maxvit.onnx");
    ASSERT_EQ(model.graph.nodes.size(), 3u) << "input, q/k/v, window_attention";
    EXPECT_EQ(RegisteredKeyText(model.graph.nodes[2].op.registered),
              "window_attention(heads=1,window=2,shift=0,grid=" + std::string(grid ? "1" : "0") +
                  ",scale=0.3)");
    const std::vector<float> out = RunImported(model, input);
    const std::vector<float> expected = Expected(w, grid, input);
    ASSERT_EQ(out.size(), expected.size());
    for (size_t i = 0; i < out.size(); ++i) EXPECT_NEAR(out[i], expected[i], 1e-5) << grid;
  }
}

// The transformer matchers walk a graph before the importer checks its
// nodes: damaged Swin and MaxViT blocks import or are refused, never crash
// (the sanitized build runs this too).
TEST(OnnxMaxVitTest, DamagedTransformerBlocksImportOrAreRefusedWithAnError) {
  OnnxBuilder swin(tiny_swin::kC, tiny_swin::kSide, tiny_swin::kSide);
  OnnxBuilder maxvit(kC, kSide, kSide);
  const std::string swin_out =
      tiny_swin::TinySwin(swin, tiny_swin::Weights{}, 1, tiny_swin::SwinMask(1));
  const std::string maxvit_out = TinyMaxVit(maxvit, Weights{}, true);
  for (const std::string& good : {swin.Bytes(swin_out), maxvit.Bytes(maxvit_out)}) {
    std::mt19937_64 rng(20261128);
    int refused = 0;
    for (int trial = 0; trial < 300; ++trial) {
      try {
        ImportOnnx(testing::Damaged(good, rng, trial), "damaged.onnx");
      } catch (const Error&) {
        ++refused;
      } catch (const std::exception& e) {
        ADD_FAILURE() << "trial " << trial << ": not an ios::Error: " << e.what();
      }
    }
    EXPECT_GT(refused, 0);
  }
}

}  // namespace tiny_maxvit
}  // namespace
}  // namespace ios::onnx_import
