// Shared by the protocol tests: decode helpers, sample messages, zoo stages.
#pragma once

#include <capnp/message.h>
#include <capnp/serialize.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "common/zoo.h"
#include "coordinator/search.h"
#include "schema/farm.capnp.h"
#include "schema/protocol.h"
#include "tests/testing/ops.h"

namespace ios::schema::protocol_testing {

using ios::testing::ConvOp;
using ios::testing::EltwiseOp;
using ios::testing::IdentityOp;
using ios::testing::PoolOp;
using Kind = DecodeError::Kind;

inline Message Decoded(std::string_view bytes) {
  auto decoded = Decode(bytes);
  if (auto* error = std::get_if<DecodeError>(&decoded)) {
    ADD_FAILURE() << "decode failed: " << ToString(error->kind) << ": " << error->message;
    return Shutdown{};
  }
  return std::get<Message>(std::move(decoded));
}

template <typename T>
inline T RoundTrip(const T& value) {
  Message message = Decoded(Encode(value));
  EXPECT_TRUE(std::holds_alternative<T>(message)) << "wrong message kind back";
  if (!std::holds_alternative<T>(message)) return T{};
  return std::get<T>(std::move(message));
}

inline DecodeError Failure(std::string_view bytes) {
  auto decoded = Decode(bytes);
  if (!std::holds_alternative<DecodeError>(decoded)) {
    ADD_FAILURE() << "decoded, but an error was expected";
    return {};
  }
  return std::get<DecodeError>(decoded);
}

inline void ExpectSameSpec(const StageSpec& a, const StageSpec& b) {
  EXPECT_EQ(a.strategy, b.strategy);
  EXPECT_EQ(a.externals, b.externals);
  ASSERT_EQ(a.groups.size(), b.groups.size());
  for (size_t g = 0; g < a.groups.size(); ++g) {
    ASSERT_EQ(a.groups[g].size(), b.groups[g].size()) << "group " << g;
    for (size_t i = 0; i < a.groups[g].size(); ++i) {
      EXPECT_EQ(a.groups[g][i].op, b.groups[g][i].op) << "group " << g << " op " << i;
      EXPECT_EQ(a.groups[g][i].inputs, b.groups[g][i].inputs) << "group " << g << " op " << i;
      EXPECT_EQ(a.groups[g][i].output, b.groups[g][i].output) << "group " << g << " op " << i;
    }
  }
  EXPECT_EQ(a.Key(), b.Key());
}

inline SliceRef External(int index, int begin, int end) { return {true, index, begin, end}; }
inline SliceRef Internal(int index, int begin, int end) { return {false, index, begin, end}; }

inline OpParams SequentialOp(std::vector<OpParams> chain) {
  OpParams op;
  op.kind = OpKind::kSequential;
  op.chain = std::move(chain);
  return op;
}

inline OpParams ActivationOp(Activation act) {
  OpParams op;
  op.kind = OpKind::kActivation;
  op.act = act;
  return op;
}

// A hand-made stage that uses every op kind, internal and external inputs,
// summed slices and concatenated terms:
//   group 0: conv 3x3 on X0 -> relu-sepconv chain on L0 -> add(L0, L1)
//   group 1: max pool on X0[0:32] ++ X1 (concatenated), then identity
//   group 2: tanh of X0[0:16] + X0[16:32] (summed)
inline StageSpec SampleStage() {
  StageSpec spec;
  spec.externals = {{64, 28, 28}, {16, 28, 28}};
  OpParams conv = ConvOp(32, 3, 1, 1, Activation::kNone);
  conv.conv.dilation = {2, 2};
  conv.conv.padding = {2, 2};
  conv.conv.bias = false;
  const OpParams chain =
      SequentialOp({ActivationOp(Activation::kRelu), ConvOp(32, 3, 1, 1, Activation::kNone, 32),
                    ConvOp(32, 1, 1, 0, Activation::kSigmoid)});
  spec.groups.push_back({
      {conv, {{External(0, 0, 64)}}, {32, 28, 28}},
      {chain, {{Internal(0, 0, 32)}}, {32, 28, 28}},
      {EltwiseOp(EltwiseType::kMul), {{Internal(0, 0, 32)}, {Internal(1, 0, 32)}}, {32, 28, 28}},
  });
  spec.groups.push_back({
      {PoolOp(PoolType::kMax, 3, 2, 1), {{External(0, 0, 32)}, {External(1, 0, 16)}}, {48, 14, 14}},
      {IdentityOp(), {{Internal(0, 8, 40)}}, {32, 14, 14}},
  });
  spec.groups.push_back({
      {ActivationOp(Activation::kTanh), {{External(0, 0, 16), External(0, 16, 32)}}, {16, 28, 28}},
  });
  return spec;
}

inline StageQuery SampleQuery() {
  StageQuery query;
  query.query_id = 0x1234567890abcdefULL;
  query.batch_size = 32;
  query.settings = {.warmup = 3,
                    .number = 7,
                    .repeat = 5,
                    .max_repeat = 20,
                    .max_relative_spread = 0.05,
                    .dtype = "float16"};
  query.stage = SampleStage();
  return query;
}

inline Hello SampleHello() {
  Hello hello;
  hello.worker_id = "gpu-host-3:4242:1";
  hello.device = {"cuda", "NVIDIA H100 80GB HBM3", "cuda|H100|sm90|132|81559MiB|13.0|9.19", false};
  hello.properties = {{"sm_count", "132"}, {"memory", "81559 MiB"}, {"", "empty key"}};
  hello.capacity = 4;
  hello.heartbeat_ms = 250;
  hello.software = "ios-worker 0.1.0";
  return hello;
}

inline StageResult SampleResult() {
  StageResult result;
  result.query_id = 77;
  result.result.median_ms = 0.123456789;
  result.result.spread_ms = 0.0042;
  result.result.samples = 36;
  return result;
}

// Distinct stages of a zoo model at default search options.
inline std::vector<StageSpec> ZooStages(const std::string& model, size_t max_count = SIZE_MAX) {
  const Graph graph = BuildZooModel(model);
  const coordinator::SearchPlan plan = coordinator::PlanSearch(graph, coordinator::SearchOptions{});
  StageKeyer keyer(graph);
  const size_t count = plan.stage_count();
  const size_t step = std::max<size_t>(1, count / std::min(count, max_count));
  std::vector<StageSpec> specs;
  for (size_t id = 0; id < count && specs.size() < max_count; id += step) {
    specs.push_back(keyer.Spec(plan.StageOf(static_cast<int>(id))));
  }
  return specs;
}

inline void ExpectZooStagesRoundTrip(const std::string& model, size_t max_count = SIZE_MAX) {
  const std::vector<StageSpec> specs = ZooStages(model, max_count);
  ASSERT_GT(specs.size(), 10u);
  MeasureSettings settings;
  for (size_t i = 0; i < specs.size(); ++i) {
    const std::string bytes = EncodeQuery(i, specs[i], 8, settings);
    const Message message = Decoded(bytes);
    const auto* query = std::get_if<StageQuery>(&message);
    ASSERT_NE(query, nullptr) << model << " stage " << i << ": " << specs[i].Describe();
    EXPECT_EQ(query->query_id, i);
    ExpectSameSpec(query->stage, specs[i]);
    if (::testing::Test::HasFailure()) return;
  }
}

// The version check reads the root struct's first data word: the union's
// discriminant sits right after the 32-bit version (bytes 20-21 of a
// single-segment message: segment table, root pointer, then the data).
constexpr size_t kDiscriminantOffset = 20;

}  // namespace ios::schema::protocol_testing
