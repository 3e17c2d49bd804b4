// common/activation.h: every activation declared once, in enum order, with a
// unique name that stage keys and IOS JSON read back.
#include "common/activation.h"

#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <string>

#include "common/ios_json.h"
#include "common/op_kinds.h"
#include "common/stage.h"
#include "common/stage_key.h"
#include "common/zoo_builder.h"
#include "tests/testing/ops.h"

namespace ios {
namespace {

TEST(ActivationTest, KindsAreInEnumOrderWithUniqueNamesThatReadBack) {
  std::set<std::string> names;
  size_t index = 0;
  for (const ActivationKind& kind : ActivationKinds()) {
    EXPECT_EQ(static_cast<size_t>(kind.id), index++);
    EXPECT_TRUE(names.insert(std::string(kind.name)).second) << kind.name;
    EXPECT_EQ(ActivationNamed(kind.name), kind.id);
    EXPECT_EQ(ToString(kind.id), kind.name);
    // IOS JSON's word for none, and operator kinds' names, are taken.
    EXPECT_NE(kind.name, "identity");
    EXPECT_EQ(RegisteredKindNamed(kind.name), nullptr) << kind.name;
  }
  EXPECT_EQ(index, 11u);
  EXPECT_FALSE(ActivationNamed("swish").has_value());
  EXPECT_FALSE(ActivationNamed("gelu_erf").has_value());
  EXPECT_EQ(ActivationNames(),
            "relu, sigmoid, tanh, relu6, hardswish, silu, hardsigmoid, leakyrelu, gelu or "
            "gelu_tanh");
  // Old names are in profiling DBs' keys: they never change.
  EXPECT_EQ(KindOf(Activation::kRelu).name, "relu");
  EXPECT_EQ(KindOf(Activation::kSigmoid).name, "sigmoid");
  EXPECT_EQ(KindOf(Activation::kTanh).name, "tanh");
}

TEST(ActivationTest, FormulasAreTheFrameworksOnes) {
  EXPECT_FLOAT_EQ(KindOf(Activation::kRelu6).apply(7.5f), 6.0f);
  EXPECT_FLOAT_EQ(KindOf(Activation::kRelu6).apply(-1.0f), 0.0f);
  EXPECT_FLOAT_EQ(KindOf(Activation::kHardSwish).apply(1.0f), 1.0f * 4.0f / 6.0f);
  EXPECT_FLOAT_EQ(KindOf(Activation::kHardSwish).apply(-4.0f), 0.0f);
  EXPECT_FLOAT_EQ(KindOf(Activation::kHardSwish).apply(5.0f), 5.0f);
  EXPECT_NEAR(KindOf(Activation::kSilu).apply(2.0f), 2.0f / (1.0f + std::exp(-2.0f)), 1e-6);
  EXPECT_FLOAT_EQ(KindOf(Activation::kHardSigmoid).apply(1.0f), 4.0f / 6.0f);
  EXPECT_FLOAT_EQ(KindOf(Activation::kHardSigmoid).apply(-3.5f), 0.0f);
  EXPECT_FLOAT_EQ(KindOf(Activation::kHardSigmoid).apply(3.5f), 1.0f);
  EXPECT_FLOAT_EQ(KindOf(Activation::kLeakyRelu).apply(-2.0f), -0.02f);
  EXPECT_FLOAT_EQ(KindOf(Activation::kLeakyRelu).apply(2.0f), 2.0f);
}

// GELU's values from x * Phi(x) (Phi the standard normal CDF), and its tanh
// approximation's, computed outside this code base in double precision.
TEST(ActivationTest, GeluAndItsTanhApproximationHaveTheirValuesAcrossTheRange) {
  const auto gelu = KindOf(Activation::kGelu).apply;
  const auto gelu_tanh = KindOf(Activation::kGeluTanh).apply;
  struct Point {
    float x;
    double erf, tanh;
  };
  for (const Point& p : {Point{-5, -1.4332578593959731e-06, -2.2917961966295044e-07},
                         Point{-3, -0.004049694094890287, -0.003637392081773019},
                         Point{-1, -0.15865525393145707, -0.15880800939172326}, Point{0, 0, 0},
                         Point{1, 0.8413447460685429, 0.8411919906082768},
                         Point{2, 1.9544997361036416, 1.9545976940877752},
                         Point{3, 2.99595030590511, 2.9963626079182273}}) {
    SCOPED_TRACE(p.x);
    EXPECT_NEAR(gelu(p.x), p.erf, 1e-6 * std::abs(p.erf));
    EXPECT_NEAR(gelu_tanh(p.x), p.tanh, 1e-6 * std::abs(p.tanh));
  }
  // The two differ by far more than rounding: neither stands for the other.
  EXPECT_GT(std::abs(gelu(-3) - gelu_tanh(-3)), 3e-4);
  // Far out, x above and (minus) nothing below; never NaN on finite input.
  for (const auto act : {gelu, gelu_tanh}) {
    EXPECT_FLOAT_EQ(act(10), 10);
    EXPECT_FLOAT_EQ(act(1e30f), 1e30f);
    EXPECT_LE(act(-10), 0);
    EXPECT_GT(act(-10), -1e-20);
    EXPECT_EQ(act(-1e30f), 0);
  }
  EXPECT_NEAR(gelu(-10), -7.619853024160593e-23, 1e-28);  // erfc keeps it
}

// A stage using each activation keys and parses back to the same spec.
TEST(ActivationTest, StageKeysOfEveryActivationParseBack) {
  for (const ActivationKind& kind : ActivationKinds()) {
    if (kind.id == Activation::kNone) continue;
    SCOPED_TRACE(std::string(kind.name));
    Graph g;
    Node input{"in", "", {}, {}, {8, 9, 9}};
    input.op.kind = OpKind::kInput;
    g.nodes.push_back(input);
    g.nodes.push_back({"conv", "", ::ios::testing::ConvOp(8, 3, 1, 1, kind.id), {{{0, 0, 8}}}, {}});
    g.nodes.push_back({"act", "", ::ios::testing::ActOp(kind.id), {{{1, 0, 8}}}, {}});
    InferShapes(g);
    Stage stage;
    stage.groups = {{1, 2}};
    const std::string key = MakeStageSpec(g, stage).Key();
    EXPECT_NE(key.find(std::string(kind.name)), std::string::npos) << key;
    EXPECT_EQ(ParseStageKey(key).Key(), key);
  }
}

// IOS JSON names each activation as stage keys do: a conv's "act" and an
// activation node's "act_type" read back the same kind.
TEST(ActivationTest, IosJsonOfEveryActivationReadsBack) {
  zoo::GraphBuilder b("activations", {8, 9, 9});
  b.BeginBlock();
  NodeId last = zoo::GraphBuilder::kInput;
  for (const ActivationKind& kind : ActivationKinds()) {
    const std::string name(kind.name);
    last = b.Add("conv_" + name, ::ios::testing::ConvOp(8, 3, 1, 1, kind.id), b.Of(last));
    last = b.Add("act_" + name, ::ios::testing::ActOp(kind.id), b.Of(last));
  }
  b.EndBlock();
  const Graph g = b.Finish();
  const std::string text = ToIosJson(g);
  const IosModel back = ParseIosJson(text, "activations.json");
  std::string difference;
  EXPECT_TRUE(StructurallyEqual(back.graph, g, &difference)) << difference;
  for (const char* name : {"\"gelu\"", "\"gelu_tanh\""}) {
    EXPECT_NE(text.find(name), std::string::npos) << name;
  }
}

}  // namespace
}  // namespace ios
