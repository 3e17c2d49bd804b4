// common/activation.h: every activation declared once, in enum order, with a
// unique name that stage keys and IOS JSON read back.
#include "common/activation.h"

#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <string>

#include "common/stage.h"
#include "common/stage_key.h"
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
  }
  EXPECT_EQ(index, 9u);
  EXPECT_FALSE(ActivationNamed("gelu").has_value());
  EXPECT_EQ(ActivationNames(),
            "relu, sigmoid, tanh, relu6, hardswish, silu, hardsigmoid or leakyrelu");
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

}  // namespace
}  // namespace ios
