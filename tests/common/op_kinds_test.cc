// common/op_kinds.h: a kind declared once is read and written everywhere the
// IR goes (IOS JSON, stage keys, descriptions, shape inference), and its
// reference arithmetic is right.
#include "common/op_kinds.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "common/error.h"
#include "common/ios_json.h"
#include "common/stage.h"
#include "common/stage_key.h"
#include "tests/common/registered_ops_testing.h"
#include "tests/testing/ops.h"

namespace ios {
namespace {

OpParams Softmax(bool log) {
  OpParams op = MakeRegisteredOp(RegisteredKind::kSoftmax);
  SetAttribute(op.registered, "log", log ? 1 : 0, "test");
  return op;
}

TEST(OpKindsTest, KindsAreInEnumOrderWithNamesNoBuiltInWordTakes) {
  // Words of stage keys and IOS JSON types of the kinds before the table.
  const std::set<std::string> built_in = {
      "conv",  "pool", "act",        "add",     "mul",      "id",         "seq",
      "input", "relu", "activation", "element", "identity", "sequential", "placeholder"};
  std::set<std::string> names;
  size_t index = 0;
  for (const OpKindSpec& spec : RegisteredKinds()) {
    EXPECT_EQ(static_cast<size_t>(spec.kind), index++);
    const std::string name(spec.name);
    EXPECT_TRUE(names.insert(name).second) << name;
    EXPECT_EQ(built_in.count(name), 0u) << name;
    for (const std::string& word : built_in) {
      // The key parser tries registered names first: none may be a longer
      // spelling of a built-in word's op text either.
      EXPECT_NE(name.rfind(word + "(", 0), 0u) << name;
    }
    EXPECT_EQ(RegisteredKindNamed(name), &spec);
    for (const OpAttribute& a : spec.attributes) {
      // A float attribute's default is checked as a float, by CheckAttributes below.
      if (a.is_float) continue;
      EXPECT_LE(a.min, a.default_value) << name << "." << a.name;
      EXPECT_LE(a.default_value, a.max) << name << "." << a.name;
    }
    const OpParams op = MakeRegisteredOp(spec.kind);
    EXPECT_NO_THROW(CheckAttributes(op.registered, "test"));
    EXPECT_EQ(KindName(op), name);
  }
  EXPECT_EQ(RegisteredKindNamed("gelu"), nullptr);
  EXPECT_EQ(RegisteredKindNames(),
            "softmax, channel_shuffle, layernorm, leaky_relu, hard_sigmoid, flatten, "
            "attention, embed_tokens, window_attention, space_to_depth");
}

TEST(OpKindsTest, AttributesAreCheckedAgainstTheirDeclaredRanges) {
  OpParams op = Softmax(false);
  EXPECT_EQ(AttributeOf(op.registered, "log"), 0);
  EXPECT_EQ(AttributeOf(op.registered, "axis"), std::nullopt);
  op.registered.attributes[0] = 2;
  try {
    CheckAttributes(op.registered, "node \"sm\"");
    FAIL() << "log=2 accepted";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "node \"sm\": log: 2 is out of range (expected 0 to 1; 1: the logarithm of the "
                 "softmax (ONNX LogSoftmax))");
  }
  op.registered.attributes.clear();
  EXPECT_THROW(CheckAttributes(op.registered, "x"), Error);
  EXPECT_THROW(SetAttribute(op.registered, "axis", 1, "x"), Error);
}

TEST(OpKindsTest, ShapeDescriptionAndKeyText) {
  EXPECT_EQ(InferOpOutput(Softmax(false), {{10, 1, 1}}, "x"), (Shape{10, 1, 1}));
  // Concatenated terms: the softmax is over all their channels.
  EXPECT_EQ(InferOpOutput(Softmax(true), {{3, 4, 4}, {5, 4, 4}}, "x"), (Shape{8, 4, 4}));
  EXPECT_EQ(Describe(Softmax(false)), "softmax");
  EXPECT_EQ(Describe(Softmax(true)), "logsoftmax");
  EXPECT_EQ(RegisteredKeyText(Softmax(true).registered), "softmax(log=1)");
  OpParams bad = Softmax(false);
  bad.registered.attributes[0] = -1;
  EXPECT_THROW(InferOpOutput(bad, {{10, 1, 1}}, "x"), Error);
}

Graph SoftmaxGraph(const OpParams& softmax) {
  Graph g = ::ios::testing::GraphWithInput({8, 5, 5});
  g.nodes.push_back({"conv", "", ::ios::testing::ConvOp(8, 3, 1, 1), {{{0, 0, 8}}}, {}});
  g.nodes.push_back({"sm", "", softmax, {{{1, 0, 8}}}, {}});
  g.nodes.push_back(
      {"seq",
       "",
       ::ios::testing::SequentialOp({::ios::testing::ActOp(Activation::kRelu), softmax}),
       {{{2, 0, 4}}},
       {}});
  g.blocks.push_back({0, {1, 2}, 3, {}});
  InferShapes(g);
  return g;
}

TEST(OpKindsTest, StageKeysParseBackAndOlderTextIsUnchanged) {
  for (const bool log : {false, true}) {
    const Graph g = SoftmaxGraph(Softmax(log));
    Stage stage;
    stage.groups = {{1, 2}, {3}};
    const StageSpec spec = MakeStageSpec(g, stage);
    const std::string key = spec.Key();
    EXPECT_NE(key.find(log ? "softmax(log=1)<" : "softmax(log=0)<"), std::string::npos) << key;
    EXPECT_NE(key.find("seq[act(relu);softmax"), std::string::npos) << key;
    // The conv keeps the text it has in every profiling DB.
    EXPECT_NE(key.find("conv(o8,k3x3,s1x1,p1x1,d1x1,g1,b1,relu)"), std::string::npos) << key;
    const StageSpec parsed = ParseStageKey(key);
    EXPECT_EQ(parsed.Key(), key);
    ASSERT_EQ(parsed.groups.size(), spec.groups.size());
    for (size_t i = 0; i < spec.groups.size(); ++i) {
      ASSERT_EQ(parsed.groups[i].size(), spec.groups[i].size());
      for (size_t k = 0; k < spec.groups[i].size(); ++k) {
        EXPECT_EQ(parsed.groups[i][k].op, spec.groups[i][k].op);
        EXPECT_EQ(parsed.groups[i][k].output, spec.groups[i][k].output);
      }
    }
  }
}

TEST(OpKindsTest, StageKeysWithBadAttributesSayWhere) {
  const Graph g = SoftmaxGraph(Softmax(false));
  Stage stage;
  stage.groups = {{2}};
  std::string key = MakeStageSpec(g, stage).Key();
  const std::string good = "softmax(log=0)";
  const size_t at = key.find(good);
  ASSERT_NE(at, std::string::npos) << key;
  for (const auto& [text, message] : std::vector<std::pair<std::string, std::string>>{
           {"softmax(log=7)", "log: 7 is out of range"},
           {"softmax(axis=1)", "expected 'log'"},
           {"softmax(log=0", "expected ')'"},
           {"softmix(log=0)",
            "expected an operator (conv, pool, act, add, mul, id, seq, softmax, "
            "channel_shuffle, layernorm, leaky_relu, hard_sigmoid, flatten, attention, "
            "embed_tokens, window_attention, space_to_depth)"}}) {
    std::string bad = key;
    bad.replace(at, good.size(), text);
    try {
      ParseStageKey(bad);
      FAIL() << bad;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
    }
  }
}

const char* kJson = R"({
  "name": "classifier",
  "input": {"type": "placeholder", "name": "in", "output_shape": [4, 1, 1]},
  "blocks": [{
    "enter_name": "in",
    "enter_node": {"type": "placeholder", "name": "in", "output_shape": [4, 1, 1]},
    "inner_nodes": [
      {"type": "conv", "name": "fc", "inputs": [[["in", 0, 4]]], "out_channels": 10,
       "kernel": [1, 1], "stride": [1, 1], "padding": [0, 0], "groups": 1, "act": "identity"}
    ],
    "exit_node": {"type": "softmax", "name": "prob", "inputs": [[["fc", 0, 10]]]LOG}
  }]
})";

std::string Json(const std::string& log) {
  std::string text = kJson;
  text.replace(text.find("LOG"), 3, log);
  return text;
}

TEST(OpKindsTest, IosJsonReadsAndWritesDeclaredAttributes) {
  const IosModel plain = ParseIosJson(Json(""), "c.json");
  EXPECT_EQ(plain.graph.node(2).op, Softmax(false));
  const IosModel log = ParseIosJson(Json(", \"log\": 1"), "c.json");
  EXPECT_EQ(log.graph.node(2).op, Softmax(true));
  const std::string written = ToIosJson(log.graph);
  EXPECT_NE(written.find("\"log\": 1"), std::string::npos) << written;
  // An attribute at its default is left out.
  EXPECT_EQ(ToIosJson(plain.graph).find("\"log\""), std::string::npos);
  const IosModel again = ParseIosJson(written, "again.json");
  std::string difference;
  EXPECT_TRUE(StructurallyEqual(log.graph, again.graph, &difference)) << difference;
}

TEST(OpKindsTest, IosJsonRefusesOutOfRangeAttributesAndListsKnownTypes) {
  try {
    ParseIosJson(Json(", \"log\": 3"), "c.json");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("c.json"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("log: 3 is out of range"), std::string::npos) << e.what();
  }
  std::string unknown = Json("");
  unknown.replace(unknown.find("\"softmax\""), 9, "\"gelu\"");
  try {
    ParseIosJson(unknown, "c.json");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("unknown operator type 'gelu'"), std::string::npos);
    EXPECT_NE(
        std::string(e.what()).find(
            "sequential, softmax, channel_shuffle, layernorm, leaky_relu, "
            "hard_sigmoid, flatten, attention, embed_tokens, window_attention, space_to_depth)"),
        std::string::npos)
        << e.what();
  }
}

TEST(OpKindsTest, SoftmaxReferenceIsShiftedAndNormalisedPerPixel) {
  const OpKindSpec& spec = SpecOf(RegisteredKind::kSoftmax);
  // Two channels x two pixels, NCHW; large values must not overflow.
  const std::vector<float> in = {1000.0f, 0.0f, 1001.0f, std::log(3.0f)};
  std::vector<float> out(4);
  spec.reference(Softmax(false).registered, {2, 1, 2}, in.data(), out.data(), {});
  const double e = std::exp(1.0);
  EXPECT_NEAR(out[0], 1 / (1 + e), 1e-6);
  EXPECT_NEAR(out[2], e / (1 + e), 1e-6);
  EXPECT_NEAR(out[1], 0.25, 1e-6);
  EXPECT_NEAR(out[3], 0.75, 1e-6);
  spec.reference(Softmax(true).registered, {2, 1, 2}, in.data(), out.data(), {});
  EXPECT_NEAR(out[1], std::log(0.25), 1e-6);
  EXPECT_NEAR(out[2], std::log(e / (1 + e)), 1e-5);
}

TEST(OpKindsTest, ChannelShuffleReadsTheGroupsColumnByColumn) {
  const OpKindSpec& spec = SpecOf(RegisteredKind::kChannelShuffle);
  // Six channels of two pixels each, valued 10 * channel + pixel: with three
  // groups the rows are (0 1)(2 3)(4 5), read by column: 0 2 4 1 3 5.
  const Shape shape{6, 1, 2};
  std::vector<float> in;
  for (int c = 0; c < 6; ++c) {
    for (int p = 0; p < 2; ++p) in.push_back(static_cast<float>(10 * c + p));
  }
  std::vector<float> out(in.size());
  spec.reference(ChannelShuffleOp(3).registered, shape, in.data(), out.data(), {});
  const std::vector<float> expected = {0, 1, 20, 21, 40, 41, 10, 11, 30, 31, 50, 51};
  EXPECT_EQ(out, expected);
  // Two groups of three: (0 1 2)(3 4 5) -> 0 3 1 4 2 5.
  spec.reference(ChannelShuffleOp(2).registered, shape, in.data(), out.data(), {});
  const std::vector<float> by_two = {0, 1, 30, 31, 10, 11, 40, 41, 20, 21, 50, 51};
  EXPECT_EQ(out, by_two);
}

// Three channels of two pixels, valued 10 * channel + pixel: channels first
// the vector is the map as it is, channels last pixel by pixel.
TEST(OpKindsTest, FlattenOrdersTheMapChannelByChannelOrPixelByPixel) {
  const OpKindSpec& spec = SpecOf(RegisteredKind::kFlatten);
  const Shape shape{3, 1, 2};
  const std::vector<float> in = {0, 1, 10, 11, 20, 21};
  OpParams op = MakeRegisteredOp(RegisteredKind::kFlatten);
  EXPECT_EQ(InferOpOutput(op, {shape}, "x"), (Shape{6, 1, 1}));
  EXPECT_EQ(RegisteredKeyText(op.registered), "flatten(channels_last=0)");
  std::vector<float> out(in.size());
  spec.reference(op.registered, shape, in.data(), out.data(), {});
  EXPECT_EQ(out, in);
  SetAttribute(op.registered, "channels_last", 1, "x");
  EXPECT_EQ(Describe(op), "flatten, channels last");
  spec.reference(op.registered, shape, in.data(), out.data(), {});
  EXPECT_EQ(out, (std::vector<float>{0, 10, 20, 1, 11, 21}));
  EXPECT_THROW(InferOpOutput(op, {{1 << 16, 1 << 8, 1 << 8}}, "x"), Error) << "2^32 values";
}

TEST(OpKindsTest, ChannelShuffleKeepsTheShapeAndRefusesGroupsThatDoNotDivide) {
  EXPECT_EQ(InferOpOutput(ChannelShuffleOp(2), {{58, 28, 28}}, "x"), (Shape{58, 28, 28}));
  EXPECT_EQ(RegisteredKeyText(ChannelShuffleOp(2).registered), "channel_shuffle(groups=2)");
  EXPECT_EQ(Describe(ChannelShuffleOp(4)), "channel shuffle (4 groups)");
  try {
    InferOpOutput(ChannelShuffleOp(4), {{58, 28, 28}}, "node 'shuffle'");
    FAIL() << "4 groups of 58 channels were accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("node 'shuffle': groups: 4 does not divide the 58 input "
                                         "channels"),
              std::string::npos)
        << e.what();
  }
}

// ---- float attributes: layernorm(eps) ------------------------------------------

TEST(OpKindsTest, FloatAttributesAreStoredAsTheirBitsAndReadAsFloats) {
  const OpParams plain = MakeRegisteredOp(RegisteredKind::kLayerNorm);
  EXPECT_EQ(plain.registered.attributes, std::vector<int>{FloatBits(1e-5f)});
  EXPECT_EQ(FloatAttributeOf(plain.registered, "eps"), 1e-5f);
  EXPECT_EQ(FloatAttributeOf(LayerNormOp(1e-6f).registered, "eps"), 1e-6f);
  EXPECT_NE(LayerNormOp(1e-6f), plain);
  // An integer attribute is not read or written as a float.
  EXPECT_EQ(FloatAttributeOf(Softmax(true).registered, "log"), std::nullopt);
  OpParams softmax = Softmax(false);
  EXPECT_THROW(SetFloatAttribute(softmax.registered, "log", 1.0f, "x"), Error);
  EXPECT_THROW(SetFloatAttribute(softmax.registered, "eps", 1.0f, "x"), Error);
}

TEST(OpKindsTest, LayerNormKeyTextIsTheShortestDecimalAndParsesBackBitExact) {
  EXPECT_EQ(RegisteredKeyText(LayerNormOp(1e-6f).registered), "layernorm(eps=1e-06)");
  EXPECT_EQ(RegisteredKeyText(LayerNormOp(1e-5f).registered), "layernorm(eps=1e-05)");
  EXPECT_EQ(RegisteredKeyText(LayerNormOp(0.5f).registered), "layernorm(eps=0.5)");
  EXPECT_EQ(Describe(LayerNormOp(1e-6f)), "layer norm over channels (eps 1e-06)");
  // The float just above 1e-06 needs more digits, and gets them.
  const float next = std::nextafter(1e-6f, 1.0f);
  for (const float eps : {1e-6f, 1e-5f, 1e-12f, 1.0f, next}) {
    const Graph g = SoftmaxGraph(LayerNormOp(eps));
    Stage stage;
    stage.groups = {{1, 2}, {3}};
    const StageSpec spec = MakeStageSpec(g, stage);
    const std::string key = spec.Key();
    EXPECT_NE(key.find(RegisteredKeyText(LayerNormOp(eps).registered) + "<"), std::string::npos)
        << key;
    const StageSpec parsed = ParseStageKey(key);
    EXPECT_EQ(parsed.Key(), key);
    ASSERT_FALSE(parsed.groups.empty());
    ASSERT_FALSE(parsed.groups[0].empty());
    EXPECT_EQ(parsed.groups[0].back().op, LayerNormOp(eps)) << key;
  }
}

TEST(OpKindsTest, LayerNormEpsOutOfRangeIsRefusedNamingTheField) {
  for (const float eps : {0.0f, -1e-6f, 2.0f, std::nanf("")}) {
    try {
      CheckAttributes(LayerNormOp(eps).registered, "node 'ln'");
      FAIL() << "eps " << eps << " accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("node 'ln': eps: "), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(" is out of range (expected above 0 to 1; "),
                std::string::npos)
          << e.what();
    }
  }
  // A stage key with eps 0 or no number is refused as well.
  const Graph g = SoftmaxGraph(LayerNormOp(1e-6f));
  Stage stage;
  stage.groups = {{2}};
  const std::string key = MakeStageSpec(g, stage).Key();
  const std::string good = "layernorm(eps=1e-06)";
  const size_t at = key.find(good);
  ASSERT_NE(at, std::string::npos) << key;
  for (const auto& [text, message] : std::vector<std::pair<std::string, std::string>>{
           {"layernorm(eps=0)", "eps: 0 is out of range"},
           {"layernorm(eps=x)", "expected a decimal number"}}) {
    std::string bad = key;
    bad.replace(at, good.size(), text);
    try {
      ParseStageKey(bad);
      FAIL() << bad;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
    }
  }
}

std::string LayerNormJson(const std::string& eps) {
  std::string text = Json(eps);
  text.replace(text.find("\"softmax\""), 9, "\"layernorm\"");
  return text;
}

TEST(OpKindsTest, IosJsonReadsAndWritesAFloatAttributeAsANumber) {
  EXPECT_EQ(ParseIosJson(LayerNormJson(""), "c.json").graph.node(2).op, LayerNormOp(1e-5f));
  const IosModel model = ParseIosJson(LayerNormJson(", \"eps\": 1e-06"), "c.json");
  EXPECT_EQ(model.graph.node(2).op, LayerNormOp(1e-6f));
  const std::string written = ToIosJson(model.graph);
  EXPECT_NE(written.find("\"eps\": 1e-06"), std::string::npos) << written;
  EXPECT_EQ(ToIosJson(ParseIosJson(LayerNormJson(""), "c.json").graph).find("\"eps\""),
            std::string::npos);
  const IosModel again = ParseIosJson(written, "again.json");
  std::string difference;
  EXPECT_TRUE(StructurallyEqual(model.graph, again.graph, &difference)) << difference;
  // Bit-exact through the file for a value needing all its digits.
  Graph g = model.graph;
  g.nodes[2].op = LayerNormOp(std::nextafter(1e-6f, 1.0f));
  EXPECT_EQ(ParseIosJson(ToIosJson(g), "next.json").graph.node(2).op, g.nodes[2].op);
  // An integer is a number too.
  EXPECT_EQ(ParseIosJson(LayerNormJson(", \"eps\": 1"), "c.json").graph.node(2).op, LayerNormOp(1));
  for (const auto& [field, message] : std::vector<std::pair<std::string, std::string>>{
           {", \"eps\": 0", "eps: 0 is out of range (expected above 0 to 1"},
           {", \"eps\": 1e300", "eps: inf is out of range"},
           {", \"eps\": \"1e-6\"", ".eps: expected a number, got \"1e-6\""}}) {
    try {
      ParseIosJson(LayerNormJson(field), "c.json");
      FAIL() << field;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("c.json"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
    }
  }
}

TEST(OpKindsTest, LayerNormReferenceNormalisesEachPixelOverItsChannels) {
  const OpKindSpec& spec = SpecOf(RegisteredKind::kLayerNorm);
  // Three channels x three pixels, NCHW. Pixel 0 is (1, 2, 6): mean 3,
  // deviations (-2, -1, 3), variance 14/3. Pixel 1 is constant: variance 0,
  // so every output is 0. Pixel 2 is pixel 0 plus 1e7, where E[x^2] - mean^2
  // would lose the variance to cancellation.
  const std::vector<float> in = {1, 5, 1e7f + 1, 2, 5, 1e7f + 2, 6, 5, 1e7f + 6};
  std::vector<float> out(in.size());
  for (const float eps : {1e-5f, 0.5f}) {
    spec.reference(LayerNormOp(eps).registered, {3, 1, 3}, in.data(), out.data(), {});
    const double scale = 1 / std::sqrt(14.0 / 3 + static_cast<double>(eps));
    const double deviations[] = {-2, -1, 3};
    for (int c = 0; c < 3; ++c) {
      EXPECT_NEAR(out[c * 3 + 0], deviations[c] * scale, 1e-6) << c;
      EXPECT_EQ(out[c * 3 + 1], 0.0f) << c;
      EXPECT_NEAR(out[c * 3 + 2], deviations[c] * scale, 1e-6) << c;
    }
  }
  // Concatenated terms: the norm is over all their channels.
  EXPECT_EQ(InferOpOutput(LayerNormOp(1e-6f), {{3, 4, 4}, {5, 4, 4}}, "x"), (Shape{8, 4, 4}));
}

// ---- leaky_relu(alpha), hard_sigmoid(alpha, beta) -------------------------------

TEST(OpKindsTest, LeakyReluAndHardSigmoidKeysParseBackBitExact) {
  EXPECT_EQ(RegisteredKeyText(MakeRegisteredOp(RegisteredKind::kLeakyRelu).registered),
            "leaky_relu(alpha=0.01)");
  EXPECT_EQ(RegisteredKeyText(MakeRegisteredOp(RegisteredKind::kHardSigmoid).registered),
            "hard_sigmoid(alpha=0.2,beta=0.5)");
  EXPECT_EQ(RegisteredKeyText(LeakyReluOp(0.2f).registered), "leaky_relu(alpha=0.2)");
  EXPECT_EQ(RegisteredKeyText(HardSigmoidOp(1.0f / 6, 0.5f).registered),
            "hard_sigmoid(alpha=0.16666667,beta=0.5)");
  EXPECT_EQ(Describe(LeakyReluOp(-0.5f)), "leaky relu (slope -0.5)");
  EXPECT_EQ(Describe(HardSigmoidOp(0.2f, -1.5f)), "hard sigmoid (alpha 0.2, beta -1.5)");
  EXPECT_EQ(InferOpOutput(LeakyReluOp(0.2f), {{3, 4, 4}, {5, 4, 4}}, "x"), (Shape{8, 4, 4}));
  EXPECT_EQ(InferOpOutput(HardSigmoidOp(0.2f, 0.5f), {{3, 4, 5}}, "x"), (Shape{3, 4, 5}));
  const float next = std::nextafter(0.2f, 1.0f);  // needs all nine digits
  for (const OpParams& op :
       {LeakyReluOp(0.2f), LeakyReluOp(-0.5f), LeakyReluOp(0.0f), LeakyReluOp(next),
        HardSigmoidOp(0.2f, 0.5f), HardSigmoidOp(-1e6f, 1e6f), HardSigmoidOp(next, -0.25f)}) {
    const Graph g = SoftmaxGraph(op);
    Stage stage;
    stage.groups = {{1, 2}, {3}};
    const std::string key = MakeStageSpec(g, stage).Key();
    EXPECT_NE(key.find(RegisteredKeyText(op.registered) + "<"), std::string::npos) << key;
    const StageSpec parsed = ParseStageKey(key);
    EXPECT_EQ(parsed.Key(), key);
    ASSERT_FALSE(parsed.groups.empty());
    ASSERT_FALSE(parsed.groups[0].empty());
    EXPECT_EQ(parsed.groups[0].back().op, op) << key;
    // And through an IOS JSON file.
    const Graph again = ParseIosJson(ToIosJson(g), "again.json").graph;
    EXPECT_EQ(again.node(2).op, op) << ToIosJson(g);
  }
  // The activations' own keys, which profiling DBs hold, are other words.
  EXPECT_EQ(RegisteredKindNamed("leakyrelu"), nullptr);
  EXPECT_EQ(RegisteredKindNamed("hardsigmoid"), nullptr);
}

TEST(OpKindsTest, LeakyReluAndHardSigmoidRefuseNonFiniteAndHugeCoefficients) {
  const float nan = std::nanf(""), inf = std::numeric_limits<float>::infinity();
  for (const auto& [op, field] :
       std::vector<std::pair<OpParams, std::string>>{{LeakyReluOp(nan), "alpha: nan"},
                                                     {LeakyReluOp(-inf), "alpha: -inf"},
                                                     {LeakyReluOp(2e6f), "alpha: 2e+06"},
                                                     {HardSigmoidOp(0.2f, nan), "beta: nan"},
                                                     {HardSigmoidOp(inf, 0.5f), "alpha: inf"}}) {
    try {
      CheckAttributes(op.registered, "node 'act'");
      FAIL() << field << " accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("node 'act': " + field +
                                           " is out of range (expected -1e+06 to 1e+06; "),
                std::string::npos)
          << e.what();
    }
  }
}

TEST(OpKindsTest, LeakyReluReferenceScalesOnlyTheNegativeInputs) {
  const OpKindSpec& spec = SpecOf(RegisteredKind::kLeakyRelu);
  const std::vector<float> in = {-4, -0.5f, 0, 0.25f, 3, -1e30f};
  std::vector<float> out(in.size());
  spec.reference(LeakyReluOp(0.2f).registered, {3, 1, 2}, in.data(), out.data(), {});
  EXPECT_EQ(out, (std::vector<float>{-0.8f, -0.1f, 0, 0.25f, 3, -1e30f * 0.2f}));
  // A negative slope flips the negative side; slope 0 is a relu.
  spec.reference(LeakyReluOp(-0.5f).registered, {3, 1, 2}, in.data(), out.data(), {});
  EXPECT_EQ(out, (std::vector<float>{2, 0.25f, 0, 0.25f, 3, 5e29f}));
  spec.reference(LeakyReluOp(0).registered, {3, 1, 2}, in.data(), out.data(), {});
  EXPECT_EQ(out, (std::vector<float>{0, 0, 0, 0.25f, 3, 0}));
}

TEST(OpKindsTest, HardSigmoidReferenceIsTheLineClippedToZeroAndOne) {
  const OpKindSpec& spec = SpecOf(RegisteredKind::kHardSigmoid);
  // ONNX's defaults: 0.2 x + 0.5 reaches 0 at x = -2.5 and 1 at x = 2.5.
  const std::vector<float> in = {-10, -2.5f, -1, 0, 1, 2.5f, 10, 1e30f};
  std::vector<float> out(in.size());
  spec.reference(HardSigmoidOp(0.2f, 0.5f).registered, {2, 2, 2}, in.data(), out.data(), {});
  const std::vector<float> onnx = {0, 0, 0.3f, 0.5f, 0.7f, 1, 1, 1};
  for (size_t i = 0; i < in.size(); ++i) EXPECT_NEAR(out[i], onnx[i], 1e-7) << in[i];
  // A negative slope turns the clip around; beta alone may leave [0, 1].
  spec.reference(HardSigmoidOp(-0.25f, 2.0f).registered, {2, 2, 2}, in.data(), out.data(), {});
  EXPECT_EQ(out, (std::vector<float>{1, 1, 1, 1, 1, 1, 0, 0}));
  spec.reference(HardSigmoidOp(0.25f, 0.25f).registered, {2, 2, 2}, in.data(), out.data(), {});
  EXPECT_EQ(out, (std::vector<float>{0, 0, 0, 0.25f, 0.5f, 0.875f, 1, 1}));
}

}  // namespace
}  // namespace ios
