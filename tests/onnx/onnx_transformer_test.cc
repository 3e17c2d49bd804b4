// The ONNX importer on a vision transformer as PyTorch 1.13 exports
// torchvision's ViT (onnx/onnx_tokens.cc, onnx/onnx_attention.cc): patches
// reshaped into tokens, a class token and a position embedding, multi-head
// attention written as Reshape / Transpose / MatMul / Softmax nodes, the
// [L, N, C] and [L*N, C] views around it, and the class token taken out for
// the head. The expected output is computed here from the ONNX operators'
// own definitions, independently of the importer and of the IR's kinds.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "common/op_kinds.h"
#include "exec/weights.h"
#include "onnx/onnx_import.h"
#include "tests/onnx/onnx_builder.h"
#include "tests/onnx/onnx_import_testing.h"

namespace ios::onnx_import {
namespace {
// Its own namespace: the test files of one executable are one unit.
namespace tiny_vit {

using testing::FloatAttr;
using ::testing::HasSubstr;
using testing::IntAttr;
using testing::IntsAttr;
using testing::OnnxBuilder;

// Sizes: a 3 x 4 x 4 input, 2 x 2 patches of 4 features (L = 4 + the
// class token), 2 heads of 2, 3 classes.
constexpr int kIn = 3, kSide = 4, kC = 4, kPatches = 4, kL = kPatches + 1, kHeads = 2, kD = 2,
              kClasses = 3;

struct Weights {
  std::vector<float> patch = exec::SeededValues(kC * kIn * 2 * 2, 1);
  std::vector<float> patch_bias = exec::SeededValues(kC, 2);
  std::vector<float> class_token = exec::SeededValues(kC, 3);
  std::vector<float> position = exec::SeededValues(kL * kC, 4);
  std::vector<float> qkv = exec::SeededValues(kC * 3 * kC, 5);  // [C, 3C]
  std::vector<float> qkv_bias = exec::SeededValues(3 * kC, 6);
  std::vector<float> out = exec::SeededValues(kC * kC, 7);  // [C, C] (Gemm transB)
  std::vector<float> out_bias = exec::SeededValues(kC, 8);
  std::vector<float> head = exec::SeededValues(kClasses * kC, 9);  // [classes, C]
  std::vector<float> head_bias = exec::SeededValues(kClasses, 10);
};

// One encoder block without its norms and MLP, exported as PyTorch does.
std::string TinyVit(OnnxBuilder& b, const Weights& w, bool scale_by_mul = false) {
  std::string x =
      b.Node("Conv", {"input", b.Weight({kC, kIn, 2, 2}, w.patch), b.Weight({kC}, w.patch_bias)},
             {IntsAttr("kernel_shape", {2, 2}), IntsAttr("strides", {2, 2})});
  x = b.Node("Reshape", {x, b.Ints({1, kC, kPatches})});
  x = b.Node("Transpose", {x}, {IntsAttr("perm", {0, 2, 1})});
  const std::string token =
      b.Node("Expand", {b.Weight({1, 1, kC}, w.class_token), b.Ints({1, 1, 1})});
  x = b.Node("Concat", {token, x}, {IntAttr("axis", 1)});
  const std::string tokens = b.Node("Add", {x, b.Weight({1, kL, kC}, w.position)});
  std::string y = b.Node("Transpose", {tokens}, {IntsAttr("perm", {1, 0, 2})});
  y = b.Node("MatMul", {y, b.Weight({kC, 3 * kC}, w.qkv)});
  y = b.Node("Add", {b.Weight({3 * kC}, w.qkv_bias), y});
  std::string part[3];
  for (int i = 0; i < 3; ++i) {
    part[i] = b.Node("Slice", {y, b.Ints({i * kC}), b.Ints({(i + 1) * kC}), b.Ints({-1})});
    part[i] = b.Node("Reshape", {part[i], b.Ints({kL, kHeads, kD})});
  }
  std::string q = b.Node("Transpose", {part[0]}, {IntsAttr("perm", {1, 0, 2})});
  q = scale_by_mul ? b.Node("Mul", {q, b.FloatConstant(1 / std::sqrt(float{kD}))})
                   : b.Node("Div", {q, b.FloatConstant(std::sqrt(float{kD}))});
  const std::string k = b.Node("Transpose", {part[1]}, {IntsAttr("perm", {1, 2, 0})});
  const std::string v = b.Node("Transpose", {part[2]}, {IntsAttr("perm", {1, 0, 2})});
  std::string a = b.Node("Softmax", {b.Node("MatMul", {q, k})}, {IntAttr("axis", -1)});
  a = b.Node("MatMul", {a, v});
  a = b.Node("Transpose", {a}, {IntsAttr("perm", {1, 0, 2})});
  a = b.Node("Reshape", {a, b.Ints({kL, kC})});
  a = b.Node("Gemm", {a, b.Weight({kC, kC}, w.out), b.Weight({kC}, w.out_bias)},
             {IntAttr("transB", 1)});
  a = b.Node("Reshape", {a, b.Ints({kL, 1, kC})});
  a = b.Node("Transpose", {a}, {IntsAttr("perm", {1, 0, 2})});
  const std::string sum = b.Node("Add", {a, tokens});
  const std::string first = b.Node("Gather", {sum, b.IntScalar(0)}, {IntAttr("axis", 1)});
  return b.Node("Gemm",
                {first, b.Weight({kClasses, kC}, w.head), b.Weight({kClasses}, w.head_bias)},
                {IntAttr("transB", 1)});
}

// The same network from the ONNX operators' definitions, token by token.
std::vector<float> ExpectedLogits(const Weights& w, const std::vector<float>& input) {
  std::vector<std::vector<double>> t(kL, std::vector<double>(kC));
  for (int c = 0; c < kC; ++c) t[0][c] = w.class_token[c] + w.position[c];
  for (int p = 0; p < kPatches; ++p) {
    const int py = p / 2, px = p % 2;
    for (int c = 0; c < kC; ++c) {
      double sum = w.patch_bias[c];
      for (int i = 0; i < kIn; ++i) {
        for (int ky = 0; ky < 2; ++ky) {
          for (int kx = 0; kx < 2; ++kx) {
            sum += double{w.patch[((c * kIn + i) * 2 + ky) * 2 + kx]} *
                   input[(i * kSide + py * 2 + ky) * kSide + px * 2 + kx];
          }
        }
      }
      t[p + 1][c] = sum + w.position[(p + 1) * kC + c];
    }
  }
  std::vector<std::vector<double>> qkv(kL, std::vector<double>(3 * kC));
  for (int l = 0; l < kL; ++l) {
    for (int o = 0; o < 3 * kC; ++o) {
      double sum = w.qkv_bias[o];
      for (int c = 0; c < kC; ++c) sum += t[l][c] * w.qkv[c * 3 * kC + o];
      qkv[l][o] = sum;
    }
  }
  std::vector<std::vector<double>> attended(kL, std::vector<double>(kC));
  for (int h = 0; h < kHeads; ++h) {
    for (int i = 0; i < kL; ++i) {
      std::vector<double> p(kL);
      double total = 0;
      for (int j = 0; j < kL; ++j) {
        double dot = 0;
        for (int d = 0; d < kD; ++d) dot += qkv[i][h * kD + d] * qkv[j][kC + h * kD + d];
        total += p[j] = std::exp(dot / std::sqrt(double{kD}));
      }
      for (int d = 0; d < kD; ++d) {
        double sum = 0;
        for (int j = 0; j < kL; ++j) sum += p[j] / total * qkv[j][2 * kC + h * kD + d];
        attended[i][h * kD + d] = sum;
      }
    }
  }
  std::vector<double> first(kC);  // the class token after the residual Add
  for (int o = 0; o < kC; ++o) {
    double sum = w.out_bias[o];
    for (int c = 0; c < kC; ++c) sum += attended[0][c] * w.out[o * kC + c];
    first[o] = sum + t[0][o];
  }
  std::vector<float> logits(kClasses);
  for (int k = 0; k < kClasses; ++k) {
    double sum = w.head_bias[k];
    for (int c = 0; c < kC; ++c) sum += first[c] * w.head[k * kC + c];
    logits[k] = static_cast<float>(sum);
  }
  return logits;
}

int CountRegistered(const ImportedModel& model, RegisteredKind kind) {
  int count = 0;
  for (const Node& node : model.graph.nodes) {
    count += node.op.kind == OpKind::kRegistered && node.op.registered.kind == kind;
  }
  return count;
}

TEST(OnnxTransformerTest, AViTBlockImportsAsEmbedTokensAttentionAndConvolutions) {
  const Weights w;
  OnnxBuilder b(kIn, kSide, kSide);
  const ImportedModel model = ImportOnnx(b.Bytes(TinyVit(b, w)), "vit.onnx");
  // input, patch conv, embed_tokens, qkv conv, attention, out conv, add,
  // the class token's pool, the head: the Reshapes and Transposes are none.
  ASSERT_EQ(model.graph.nodes.size(), 9u);
  EXPECT_EQ(CountRegistered(model, RegisteredKind::kEmbedTokens), 1);
  EXPECT_EQ(CountRegistered(model, RegisteredKind::kAttention), 1);
  for (const Node& node : model.graph.nodes) {
    if (node.op.kind != OpKind::kRegistered) continue;
    if (node.op.registered.kind == RegisteredKind::kAttention) {
      EXPECT_EQ(RegisteredKeyText(node.op.registered), "attention(heads=2)");
      EXPECT_EQ(node.output, (Shape{kC, kL, 1}));
    } else {
      EXPECT_EQ(RegisteredKeyText(node.op.registered), "embed_tokens(class_token=1)");
    }
  }
  ASSERT_TRUE(model.has_weights);
  const std::vector<float> input = exec::SeededValues(kIn * kSide * kSide, 11);
  const std::vector<float> out = RunImported(model, input);
  const std::vector<float> expected = ExpectedLogits(w, input);
  ASSERT_EQ(out.size(), expected.size());
  for (size_t i = 0; i < out.size(); ++i) EXPECT_NEAR(out[i], expected[i], 1e-5) << i;
}

TEST(OnnxTransformerTest, QueriesMultipliedByTheInverseRootImportAlike) {
  const Weights w;
  OnnxBuilder b(kIn, kSide, kSide);
  const ImportedModel model = ImportOnnx(b.Bytes(TinyVit(b, w, true)), "vit.onnx");
  EXPECT_EQ(CountRegistered(model, RegisteredKind::kAttention), 1);
  const std::vector<float> input = exec::SeededValues(kIn * kSide * kSide, 12);
  const std::vector<float> out = RunImported(model, input);
  const std::vector<float> expected = ExpectedLogits(w, input);
  for (size_t i = 0; i < out.size(); ++i) EXPECT_NEAR(out[i], expected[i], 1e-5) << i;
}

TEST(OnnxTransformerTest, RefusalsNameWhatIsMissing) {
  {  // Attention scaled by something else than 1/sqrt(d).
    const Weights w;
    OnnxBuilder b(kIn, kSide, kSide);
    const std::string out = TinyVit(b, w);
    for (auto& node : *b.Model().mutable_graph()->mutable_node()) {
      if (node.op_type() != "Constant") continue;
      for (auto& a : *node.mutable_attribute()) {
        if (a.name() == "value") a.mutable_t()->set_float_data(0, 3.0f);
      }
    }
    EXPECT_THAT(Refusal(b.Bytes(out)), HasSubstr("only scaled dot products (1/sqrt(2)"));
  }
  {  // Another token than the first.
    OnnxBuilder b(kC, 1, kPatches);
    std::string x = b.Node("Reshape", {"input", b.Ints({1, kC, kPatches})});
    x = b.Node("Transpose", {x}, {IntsAttr("perm", {0, 2, 1})});
    x = b.Node("Gather", {x, b.IntScalar(2)}, {IntAttr("axis", 1)});
    EXPECT_THAT(Refusal(b.Bytes(x)), HasSubstr("only taking the first token out of tokens"));
  }
  {  // A position embedding of another length.
    OnnxBuilder b(kC, 1, kPatches);
    std::string x = b.Node("Reshape", {"input", b.Ints({1, kC, kPatches})});
    x = b.Node("Transpose", {x}, {IntsAttr("perm", {0, 2, 1})});
    x = b.Node("Add", {x, b.Weight({1, kPatches + 2, kC}, 1)});
    EXPECT_THAT(Refusal(b.Bytes(x)), HasSubstr("only a constant with one value per channel"));
  }
}

TEST(OnnxTransformerTest, TokensWithoutAClassTokenGetAPositionEmbeddingAlone) {
  OnnxBuilder b(2, 1, 3);
  std::string x = b.Node("Reshape", {"input", b.Ints({1, 2, 3})});
  x = b.Node("Transpose", {x}, {IntsAttr("perm", {0, 2, 1})});
  x = b.Node("Add", {x, b.Weight({1, 3, 2}, {10, 20, 30, 40, 50, 60})});
  x = b.Node("Transpose", {x}, {IntsAttr("perm", {0, 2, 1})});
  x = b.Node("Reshape", {x, b.Ints({1, 6})});
  const ImportedModel model = ImportOnnx(b.Bytes(x), "pos.onnx");
  EXPECT_EQ(CountRegistered(model, RegisteredKind::kEmbedTokens), 1);
  // Input channel c, token t holds c * 3 + t; [N, C, L] flattened is channel by channel.
  const std::vector<float> out = RunImported(model, {0, 1, 2, 3, 4, 5});
  EXPECT_EQ(out, (std::vector<float>{10, 31, 52, 23, 44, 65}));
}

// An export at a fixed batch of 2 expands the class token to [2, 1, C]:
// one token for every sample when its rows are equal, refused otherwise.
TEST(OnnxTransformerTest, AClassTokenExpandedToAFixedBatchIsOneToken) {
  const auto model = [](bool expanded) {
    OnnxBuilder b(2, 1, 3);
    b.InputDim(0, 2);
    std::string x = b.Node("Reshape", {"input", b.Ints({2, 2, 3})});
    x = b.Node("Transpose", {x}, {IntsAttr("perm", {0, 2, 1})});
    const std::string token =
        expanded ? b.Node("Expand", {b.Weight({1, 1, 2}, {7, 8}), b.Ints({2, 1, 2})})
                 : b.Weight({2, 1, 2}, {7, 8, 9, 10});
    x = b.Node("Concat", {token, x}, {IntAttr("axis", 1)});
    x = b.Node("Add", {x, b.Weight({1, 4, 2}, {0, 100, 0, 200, 0, 300, 0, 400})});
    x = b.Node("Transpose", {x}, {IntsAttr("perm", {0, 2, 1})});
    return b.Bytes(b.Node("Reshape", {x, b.Ints({2, 8})}));
  };
  const ImportedModel imported = ImportOnnx(model(true), "batch2.onnx");
  EXPECT_EQ(imported.batch, 2);
  EXPECT_EQ(CountRegistered(imported, RegisteredKind::kEmbedTokens), 1);
  // Sample n, channel c, token t holds n * 10 + c * 3 + t.
  std::vector<float> input;
  for (int n = 0; n < 2; ++n) {
    for (int i = 0; i < 6; ++i) input.push_back(static_cast<float>(n * 10 + i));
  }
  auto device = exec::MakeReferenceDevice();
  const run::Execution run =
      run::Execute(*device, imported.graph, run::SequentialNetworkSchedule(imported.graph),
                   imported.weights, 2, input, nullptr);
  // Channel 0 gains 0 at every token, channel 1 100 * (t + 1); the class
  // token (7, 8) first.
  EXPECT_EQ(run.output, (std::vector<float>{7, 0, 1, 2, 108, 203, 304, 405,  //
                                            7, 10, 11, 12, 108, 213, 314, 415}));
  EXPECT_THAT(Refusal(model(false)),
              HasSubstr("a class token per sample [2, 1, 2] whose samples differ"));
}

// export_params=False: the class token and the embedding are graph inputs
// without values; the structure imports and runs on seeded weights.
TEST(OnnxTransformerTest, AStructureOnlyExportImportsWithoutWeights) {
  OnnxBuilder b(2, 1, 3);
  std::string x = b.Node("Reshape", {"input", b.Ints({1, 2, 3})});
  x = b.Node("Transpose", {x}, {IntsAttr("perm", {0, 2, 1})});
  const std::string token = b.Node("Expand", {b.WeightInput({1, 1, 2}), b.Ints({1, 1, 1})});
  x = b.Node("Concat", {token, x}, {IntAttr("axis", 1)});
  x = b.Node("Add", {x, b.WeightInput({1, 4, 2})});
  const std::string first = b.Node("Gather", {x, b.IntScalar(0)}, {IntAttr("axis", 1)});
  const ImportedModel model = ImportOnnx(b.Bytes(first), "structure.onnx");
  EXPECT_EQ(CountRegistered(model, RegisteredKind::kEmbedTokens), 1);
  EXPECT_FALSE(model.has_weights);
  EXPECT_EQ(exec::WeightStore::Random(model.graph, 1).size(), 1u);
}

// Swin's patch merging: x[..., 0::2, 0::2, :], x[..., 1::2, 0::2, :],
// x[..., 0::2, 1::2, :], x[..., 1::2, 1::2, :] of a channels-last map,
// each two Slices, concatenated on the channels.
std::string PatchMerging(OnnxBuilder& b, const std::string& x, const std::vector<int>& order) {
  std::vector<std::string> phases;
  for (const int i : order) {
    const int64_t dy = i % 2, dx = i / 2, end = int64_t{1} << 40;
    std::string p = b.Node("Slice", {x, b.Ints({dy}), b.Ints({end}), b.Ints({1}), b.Ints({2})});
    p = b.Node("Slice", {p, b.Ints({dx}), b.Ints({end}), b.Ints({2}), b.Ints({2})});
    phases.push_back(p);
  }
  return b.Node("Concat", phases, {IntAttr("axis", -1)});
}

TEST(OnnxTransformerTest, PatchMergingIsOneSpaceToDepthInTorchvisionsOrder) {
  OnnxBuilder b(2, 2, 4);
  std::string x = b.Node("Transpose", {"input"}, {IntsAttr("perm", {0, 2, 3, 1})});
  x = PatchMerging(b, x, {0, 1, 2, 3});
  x = b.Node("Transpose", {x}, {IntsAttr("perm", {0, 3, 1, 2})});
  const ImportedModel model = ImportOnnx(b.Bytes(x), "merge.onnx");
  EXPECT_EQ(CountRegistered(model, RegisteredKind::kSpaceToDepth), 1);
  // Channel c, row y, column x holds 100 c + 10 y + x.
  std::vector<float> input;
  for (int c = 0; c < 2; ++c) {
    for (int y = 0; y < 2; ++y) {
      for (int col = 0; col < 4; ++col) input.push_back(static_cast<float>(100 * c + 10 * y + col));
    }
  }
  // Output channel (dx * 2 + dy) * 2 + c, pixel (0, j): input (c, dy, 2 j + dx).
  const std::vector<float> expected = {0, 2, 100, 102, 10, 12, 110, 112,
                                       1, 3, 101, 103, 11, 13, 111, 113};
  EXPECT_EQ(RunImported(model, input), expected);
  OnnxBuilder other(2, 2, 4);
  x = other.Node("Transpose", {"input"}, {IntsAttr("perm", {0, 2, 3, 1})});
  EXPECT_THAT(Refusal(other.Bytes(PatchMerging(other, x, {0, 2, 1, 3}))),
              HasSubstr("not all 4 phases of one map in Swin's order"));
}

}  // namespace tiny_vit
}  // namespace
}  // namespace ios::onnx_import
