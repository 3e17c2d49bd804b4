// Weights kept out of protobuf (onnx/onnx_wire.h): the large raw_data of a
// model's initializers are cut out of the bytes protobuf parses and read
// from the file's own bytes; the model imports as the whole file would;
// protobuf's rule for a field written twice holds; damaged bytes never
// make the walker read outside them.
#include "onnx/onnx_wire.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "common/error.h"
#include "onnx/onnx_import.h"
#include "onnx/onnx_tensors.h"
#include "tests/onnx/onnx_builder.h"
#include "tests/onnx/onnx_import_testing.h"

namespace ios::onnx_import {
namespace wire_test {

using detail::SplitModel;
using detail::SplitOutWeights;
using testing::IntsAttr;
using testing::OnnxBuilder;

// 64 x 64 x 3 x 3 floats: 144 KiB, over the 64 KiB cut.
constexpr int kChannels = 64;

std::vector<float> Seeded(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> value(-1.0f, 1.0f);
  std::vector<float> values(n);
  for (float& v : values) v = value(rng);
  return values;
}

//! A convolution with a 144 KiB kernel and a 256-byte bias, and its bytes.
struct ConvModel {
  std::vector<float> kernel = Seeded(size_t{kChannels} * kChannels * 9, 7);
  OnnxBuilder builder{kChannels, 4, 4};
  std::string bytes;

  ConvModel() {
    const std::string w = builder.Weight({kChannels, kChannels, 3, 3}, kernel);
    const std::string b = builder.Weight({kChannels}, 8);
    bytes = builder.Bytes(builder.Node("Conv", {"input", w, b}, {IntsAttr("pads", {1, 1, 1, 1})}));
  }
};

bool Inside(std::string_view part, const std::string& whole) {
  return part.data() >= whole.data() && part.data() + part.size() <= whole.data() + whole.size();
}

void PutVarint(std::string& out, uint64_t value) {
  for (; value >= 0x80; value >>= 7) out.push_back(static_cast<char>((value & 0x7f) | 0x80));
  out.push_back(static_cast<char>(value));
}

//! Length-delimited field `number` holding `payload`, in protobuf's wire format.
std::string Field(int number, const std::string& payload) {
  std::string out;
  PutVarint(out, static_cast<uint64_t>(number) << 3 | 2);
  PutVarint(out, payload.size());
  return out + payload;
}

TEST(OnnxWireTest, LargeRawDataAreCutOutAndViewedInTheFilesBytes) {
  const ConvModel conv;
  const SplitModel split = SplitOutWeights(conv.bytes);
  ASSERT_EQ(split.raw.size(), 2u);
  ASSERT_TRUE(split.raw[0].has_value());
  EXPECT_FALSE(split.raw[1].has_value()) << "the 256-byte bias stays in the model";
  EXPECT_TRUE(Inside(*split.raw[0], conv.bytes));
  ASSERT_EQ(split.raw[0]->size(), conv.kernel.size() * sizeof(float));
  EXPECT_EQ(std::memcmp(split.raw[0]->data(), conv.kernel.data(), split.raw[0]->size()), 0);

  EXPECT_LT(split.skeleton.size(), 4096u) << "the skeleton is all but the kernel";
  ::onnx::ModelProto skeleton;
  ASSERT_TRUE(skeleton.ParseFromString(split.skeleton));
  const auto& initializers = skeleton.graph().initializer();
  ASSERT_EQ(initializers.size(), 2);
  EXPECT_EQ(initializers[0].raw_data().size(), 1u) << "a placeholder the checker accepts";
  EXPECT_EQ(initializers[0].dims_size(), 4);
  EXPECT_EQ(initializers[1].raw_data().size(), size_t{kChannels} * sizeof(float));
  EXPECT_EQ(skeleton.graph().node_size(), 1);
}

TEST(OnnxWireTest, TheSplitModelImportsAsItsValuesWrittenOutInFull) {
  const ConvModel conv;
  // The same model with the kernel in float_data, which is never cut.
  ::onnx::ModelProto whole;
  ASSERT_TRUE(whole.ParseFromString(conv.bytes));
  ::onnx::TensorProto& kernel = *whole.mutable_graph()->mutable_initializer(0);
  kernel.clear_raw_data();
  for (float v : conv.kernel) kernel.add_float_data(v);
  const std::string in_full = whole.SerializeAsString();
  ASSERT_TRUE(SplitOutWeights(in_full).raw.empty()) << "nothing to cut";

  const std::vector<float> input = Seeded(size_t{kChannels} * 16, 9);
  const std::vector<float> split = RunImported(ImportOnnx(conv.bytes, "split.onnx"), input);
  const std::vector<float> full = RunImported(ImportOnnx(in_full, "full.onnx"), input);
  ASSERT_EQ(split.size(), size_t{kChannels} * 16);
  EXPECT_EQ(split, full);
}

// A weight read by one operator is moved into it (Importer::TakeFloats);
// one read by two is copied for each, and both compute with it.
TEST(OnnxWireTest, AWeightTwoConvolutionsShareIsGivenToBoth) {
  constexpr int kWide = 128;  // a 64 KiB kernel: cut out of the model, too
  const std::vector<float> kernel = Seeded(size_t{kWide} * kWide, 11);
  const auto model = [&](bool shared) {
    OnnxBuilder builder(kWide, 2, 2);
    const std::string first = builder.Weight({kWide, kWide, 1, 1}, kernel);
    const std::string second = shared ? first : builder.Weight({kWide, kWide, 1, 1}, kernel);
    const std::string y = builder.Node("Conv", {"input", first});
    return builder.Bytes(builder.Node("Conv", {y, second}));
  };
  const std::vector<float> input = Seeded(size_t{kWide} * 4, 12);
  const std::vector<float> shared = RunImported(ImportOnnx(model(true), "shared.onnx"), input);
  const std::vector<float> apart = RunImported(ImportOnnx(model(false), "apart.onnx"), input);
  ASSERT_EQ(shared.size(), size_t{kWide} * 4);
  EXPECT_EQ(shared, apart);
  float largest = 0;
  for (float v : shared) largest = std::max(largest, std::abs(v));
  EXPECT_GT(largest, 0.1f) << "both convolutions computed with the kernel";
}

TEST(OnnxWireTest, NothingIsCutFromAModelWithoutLargeWeights) {
  OnnxBuilder builder(3, 8, 8);
  const std::string w = builder.Weight({4, 3, 3, 3}, 1);
  const std::string bytes = builder.Bytes(builder.Node("Conv", {"input", w}));
  const SplitModel split = SplitOutWeights(bytes);
  EXPECT_TRUE(split.skeleton.empty());
  EXPECT_TRUE(split.raw.empty());
}

TEST(OnnxWireTest, ARawDataWrittenTwiceKeepsTheLastAsProtobufDoes) {
  const ConvModel conv;
  ::onnx::ModelProto model;
  ASSERT_TRUE(model.ParseFromString(conv.bytes));
  ::onnx::TensorProto first = model.graph().initializer(0);
  model.mutable_graph()->mutable_initializer()->DeleteSubrange(0, 1);
  ::onnx::GraphProto graph = model.graph();
  model.clear_graph();
  // The kernel's tensor, then a second raw_data of 8 bytes: a large one
  // followed by a small one, and the other way round.
  const std::string small(8, '\x01');
  for (const bool large_last : {false, true}) {
    ::onnx::TensorProto once = first;
    once.clear_raw_data();
    const std::string large = first.raw_data();
    const std::string tensor = once.SerializeAsString() + Field(9, large_last ? small : large) +
                               Field(9, large_last ? large : small);
    const std::string bytes =
        model.SerializeAsString() + Field(7, graph.SerializeAsString() + Field(5, tensor));
    ::onnx::ModelProto reference;
    ASSERT_TRUE(reference.ParseFromString(bytes));
    const std::string& kept = reference.graph().initializer(1).raw_data();
    EXPECT_EQ(kept.size(), large_last ? large.size() : small.size());

    const SplitModel split = SplitOutWeights(bytes);
    if (large_last) {
      ASSERT_EQ(split.raw.size(), 2u) << "the bias, then the tensor written by hand";
      ASSERT_TRUE(split.raw[1].has_value());
      EXPECT_EQ(*split.raw[1], kept);
      ::onnx::ModelProto skeleton;
      ASSERT_TRUE(skeleton.ParseFromString(split.skeleton));
      EXPECT_EQ(skeleton.graph().initializer(1).raw_data().size(), 1u) << "the placeholder";
    } else {
      // The large one is overwritten: nothing is cut, protobuf parses it all.
      EXPECT_TRUE(split.skeleton.empty());
      EXPECT_TRUE(split.raw.empty());
    }
  }
}

TEST(OnnxWireTest, DamagedBytesAreCutWithinThemselvesOrLeftToProtobuf) {
  const ConvModel conv;
  std::mt19937_64 rng(20261128);
  int refused = 0;
  for (int trial = 0; trial < 300; ++trial) {
    const std::string bytes = testing::Damaged(conv.bytes, rng, trial);
    const SplitModel split = SplitOutWeights(bytes);
    for (const auto& raw : split.raw) {
      if (raw) {
        EXPECT_TRUE(Inside(*raw, bytes)) << "trial " << trial;
      }
    }
    try {
      ImportOnnx(bytes, "damaged.onnx");
    } catch (const Error&) {
      ++refused;
    } catch (const std::exception& e) {
      ADD_FAILURE() << "trial " << trial << ": not an ios::Error: " << e.what();
    }
  }
  EXPECT_GT(refused, 0);
}

TEST(OnnxWireTest, TransposedAndScaledWeightsAreWrittenInOrder) {
  // [2, 3] -> [3, 2].
  const std::vector<float> m = {1, 2, 3, 4, 5, 6};
  EXPECT_EQ(detail::Transposed(m, 2, 3), (std::vector<float>{1, 4, 2, 5, 3, 6}));
  EXPECT_EQ(detail::Transposed(m, 2, 3, 2.0f), (std::vector<float>{2, 8, 4, 10, 6, 12}));
  EXPECT_EQ(detail::Scaled(m, 0.5f), (std::vector<float>{0.5f, 1, 1.5f, 2, 2.5f, 3}));
  std::vector<float> scratch(2, 9.0f);  // too small: grown, then kept
  EXPECT_EQ(detail::TransposedInPlace(m, 2, 3, 2.0f, scratch),
            (std::vector<float>{2, 8, 4, 10, 6, 12}));
  EXPECT_GE(scratch.size(), 6u);
  EXPECT_EQ(detail::LargeZeros<int>(3), (std::vector<int>{0, 0, 0}));
}

}  // namespace wire_test
}  // namespace ios::onnx_import
