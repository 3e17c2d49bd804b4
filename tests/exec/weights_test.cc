// Weights: seeded values that do not depend on the machine, the weights
// file round trip, and Load's refusals naming file, node and field.
#include "exec/weights.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <bit>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "common/error.h"
#include "common/op_kinds.h"
#include "tests/exec/exec_testing.h"
#include "tests/testing/ops.h"

namespace ios::exec {
namespace {

using ::ios::exec::testing::GraphBuilder;
using ::ios::testing::ConvOp;

constexpr uint64_t kPinnedFingerprint = 17185268465360714881ull;

Graph SmallNet(int first_kernel = 3) {
  GraphBuilder g({3, 5, 5}, "small");
  const NodeId a = g.Add("a", ConvOp(4, first_kernel, 1, first_kernel / 2), {{g.S(0)}});
  OpParams seq;
  seq.kind = OpKind::kSequential;
  OpParams relu;
  relu.kind = OpKind::kActivation;
  seq.chain = {relu, ConvOp(4, 3, 1, 1, Activation::kNone, 4), ConvOp(2, 1, 1, 0)};
  seq.chain[2].conv.bias = false;
  g.Add("seq", seq, {{g.S(a)}});
  return g.Done();
}

class WeightsFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = (std::filesystem::temp_directory_path() /
             ("ios_weights_" + std::to_string(::getpid()) + "_" +
              ::testing::UnitTest::GetInstance()->current_test_info()->name() + ".bin"))
                .string();
  }
  void TearDown() override { std::filesystem::remove(path_); }

  std::string LoadError(const Graph& graph) {
    try {
      WeightStore::Load(graph, path_);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }
  std::string Bytes() {
    std::ifstream in(path_, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  }
  void WriteBytes(const std::string& bytes) {
    std::ofstream(path_, std::ios::binary | std::ios::trunc) << bytes;
  }

  std::string path_;
};

TEST(RandomConvWeightsTest, SameSeedSameValuesEverywhere) {
  const ConvParams conv = ConvOp(2, 3, 1, 1).conv;
  const ConvWeights w = RandomConvWeights(conv, 3, 42);
  EXPECT_EQ(w, RandomConvWeights(conv, 3, 42));
  EXPECT_NE(w, RandomConvWeights(conv, 3, 43));
  ASSERT_EQ(w.kernel.size(), 2u * 3 * 3 * 3);
  ASSERT_EQ(w.bias.size(), 2u);
  // He-uniform: |w| < sqrt(6 / fan_in) with fan_in = 27.
  for (float v : w.kernel) EXPECT_LT(std::abs(v), std::sqrt(6.0f / 27.0f));
  // Pinned values: splitmix64 and the float conversion are exact integer
  // arithmetic, so every machine produces these bits.
  uint64_t fingerprint = 0;
  for (float v : w.kernel) fingerprint = fingerprint * 31 + std::bit_cast<uint32_t>(v);
  for (float v : w.bias) fingerprint = fingerprint * 31 + std::bit_cast<uint32_t>(v);
  EXPECT_EQ(fingerprint, kPinnedFingerprint);
}

TEST(RandomConvWeightsTest, RefusesGroupsThatDoNotDivide) {
  EXPECT_THROW(RandomConvWeights(ConvOp(4, 1, 1, 0, Activation::kNone, 2).conv, 3, 1), Error);
}

TEST(WeightStoreTest, RandomCoversEveryConvolutionIncludingChainElements) {
  const Graph graph = SmallNet();
  const WeightStore store = WeightStore::Random(graph, 1);
  EXPECT_EQ(store.size(), 3u);
  EXPECT_EQ(store.At({1, 0}).kernel_h, 3);
  EXPECT_EQ(store.At({2, 1}).in_per_group, 1);  // depthwise
  EXPECT_TRUE(store.At({2, 2}).bias.empty());
  EXPECT_THROW(store.At({2, 0}), Error);  // the relu has none
  // Values follow node names, not numbering.
  EXPECT_EQ(store.At({1, 0}), WeightStore::Random(graph, 1).At({1, 0}));
  EXPECT_NE(store.At({1, 0}), WeightStore::Random(graph, 2).At({1, 0}));
}

// A registered kind declaring weights (embed_tokens: a position embedding
// and a class token) gets them in the store and the file like a convolution.
Graph TokenNet(int stride) {
  GraphBuilder g({3, 4, 4}, "tokens");
  const NodeId patch = g.Add("patch", ConvOp(8, 1, stride, 0), {{g.S(0)}});
  g.Add("embed", MakeRegisteredOp(RegisteredKind::kEmbedTokens), {{g.S(patch)}});
  return g.Done();
}

TEST(WeightStoreTest, RandomCoversRegisteredKindsWithWeightsInTheirDeclaredShape) {
  const WeightStore store = WeightStore::Random(TokenNet(2), 1);
  ASSERT_EQ(store.size(), 2u);
  const ConvWeights& embed = store.At({2, 0});
  EXPECT_EQ(embed.out_channels, 8);
  EXPECT_EQ(embed.kernel_h, 5);  // 2 x 2 patches and the class token
  EXPECT_EQ(embed.kernel.size(), 40u);
  EXPECT_EQ(embed.bias.size(), 8u);
  for (const float v : embed.kernel) EXPECT_LE(std::fabs(v), 0.1f);
}

TEST_F(WeightsFileTest, RegisteredKindWeightsRoundTripAndAreCheckedOnLoad) {
  const Graph graph = TokenNet(2);
  const WeightStore store = WeightStore::Random(graph, 3);
  store.Save(graph, path_);
  EXPECT_EQ(WeightStore::Load(graph, path_).At({2, 0}), store.At({2, 0}));
  // A stride of 1 makes 16 patches: the same convolution, 17 tokens.
  const std::string error = LoadError(TokenNet(1));
  EXPECT_NE(error.find("node 'embed': kernel_h: expected 17, got 5"), std::string::npos) << error;
}

TEST_F(WeightsFileTest, RoundTripKeepsEveryValue) {
  const Graph graph = SmallNet();
  const WeightStore store = WeightStore::Random(graph, 5);
  store.Save(graph, path_);
  const WeightStore loaded = WeightStore::Load(graph, path_);
  ASSERT_EQ(loaded.size(), store.size());
  for (const ConvSite site : {ConvSite{1, 0}, ConvSite{2, 1}, ConvSite{2, 2}}) {
    EXPECT_EQ(loaded.At(site), store.At(site));
  }
}

TEST_F(WeightsFileTest, LoadRefusesAShapeMismatchNamingNodeAndField) {
  WeightStore::Random(SmallNet(3), 5).Save(SmallNet(3), path_);
  const std::string error = LoadError(SmallNet(5));
  EXPECT_NE(error.find(path_), std::string::npos) << error;
  EXPECT_NE(error.find("node 'a': kernel_h: expected 5, got 3"), std::string::npos) << error;
}

TEST_F(WeightsFileTest, LoadRefusesUnknownNodesAndMissingConvolutions) {
  GraphBuilder g({3, 5, 5}, "other");
  g.Add("b", ConvOp(4, 3, 1, 1), {{g.S(0)}});
  const Graph other = g.Done();
  WeightStore::Random(other, 1).Save(other, path_);
  EXPECT_NE(LoadError(SmallNet()).find("node 'b': no such node"), std::string::npos)
      << LoadError(SmallNet());

  const Graph graph = SmallNet();
  WeightStore partial;
  partial.Set({1, 0}, WeightStore::Random(graph, 1).At({1, 0}));
  partial.Save(graph, path_);
  EXPECT_NE(LoadError(graph).find("node 'seq' (chain index 1): missing"), std::string::npos)
      << LoadError(graph);
}

TEST_F(WeightsFileTest, LoadRefusesBadMagicVersionTruncationAndTrailingBytes) {
  const Graph graph = SmallNet();
  WeightStore::Random(graph, 5).Save(graph, path_);
  const std::string good = Bytes();

  WriteBytes("NOTWEIGHTS" + good.substr(10));
  EXPECT_NE(LoadError(graph).find("bad magic"), std::string::npos) << LoadError(graph);

  std::string version = good;
  version[8] = 9;
  WriteBytes(version);
  EXPECT_NE(LoadError(graph).find("version 9, expected 1"), std::string::npos) << LoadError(graph);

  WriteBytes(good.substr(0, good.size() - 3));
  EXPECT_NE(LoadError(graph).find("truncated"), std::string::npos) << LoadError(graph);

  WriteBytes(good + "xx");
  EXPECT_NE(LoadError(graph).find("2 unexpected bytes"), std::string::npos) << LoadError(graph);

  std::filesystem::remove(path_);
  EXPECT_NE(LoadError(graph).find("cannot be opened"), std::string::npos) << LoadError(graph);
}

}  // namespace
}  // namespace ios::exec
