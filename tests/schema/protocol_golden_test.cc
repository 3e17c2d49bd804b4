// Frames cross versions: a worker built last month must read today's query.
// These tests pin one frame of each kind that carries data (Hello, Query,
// Result) as hex under tests/data/golden/: the recorded bytes must decode to
// the values below, and encoding those values must give the same bytes. A
// deliberate change is re-recorded with IOS_UPDATE_GOLDENS=1
// (tests/testing/golden.h) and normally bumps kProtocolVersion.
//
// The values are written out here rather than taken from protocol_testing.h
// so that editing shared samples cannot move a golden. The query has no
// merge stage: the merge rule may evolve without changing the format.
#include <gtest/gtest.h>

#include <string>
#include <variant>

#include "schema/protocol.h"
#include "tests/testing/golden.h"
#include "tests/testing/ops.h"

namespace ios::schema {
namespace {

using ::ios::testing::ConvOp;
using ::ios::testing::EltwiseOp;
using ::ios::testing::FromHex;
using ::ios::testing::Golden;
using ::ios::testing::IdentityOp;
using ::ios::testing::PoolOp;
using ::ios::testing::ToHex;

Hello GoldenHello() {
  Hello hello;
  hello.worker_id = "gpu-host-7:31337:0";
  hello.device = {"sim", "sim:v100", "sim|v100|model-1", true};
  hello.properties = {{"sm_count", "80"}, {"memory", "16160 MiB"}};
  hello.capacity = 2;
  hello.heartbeat_ms = 500;
  hello.software = "ios-worker 0.1.0";
  hello.devices = 4;  // protocol 7
  hello.links = {{"nvlink", 50, 10, false}};
  return hello;
}

// Every op kind, a dilated conv without bias, a sequential op, internal and
// external inputs, sliced, summed and concatenated terms.
StageQuery GoldenQuery() {
  StageQuery query;
  query.query_id = 0x0123456789abcdefULL;
  query.batch_size = 16;
  query.settings = {.warmup = 2,
                    .number = 6,
                    .repeat = 6,
                    .max_repeat = 30,
                    .max_relative_spread = 0.05,
                    .dtype = "float32",
                    .protocol = StageProtocol::kExecuted,
                    .warm_weights = true};
  StageSpec& spec = query.stage;
  spec.strategy = Strategy::kParallel;
  spec.externals = {{32, 14, 14}, {8, 14, 14}};
  OpParams dilated = ConvOp(16, 3, 1, 2, Activation::kNone);
  dilated.conv.dilation = {2, 2};
  dilated.conv.bias = false;
  OpParams relu;
  relu.kind = OpKind::kActivation;
  relu.act = Activation::kRelu;
  OpParams sequential;
  sequential.kind = OpKind::kSequential;
  sequential.chain = {relu, ConvOp(16, 3, 1, 1, Activation::kNone, 16),
                      ConvOp(16, 1, 1, 0, Activation::kSigmoid)};
  const auto ext = [](int index, int begin, int end) { return SliceRef{true, index, begin, end}; };
  const auto own = [](int index, int begin, int end) { return SliceRef{false, index, begin, end}; };
  spec.groups.push_back({
      {dilated, {{ext(0, 0, 32)}}, {16, 14, 14}},
      {sequential, {{own(0, 0, 16)}}, {16, 14, 14}},
      {EltwiseOp(EltwiseType::kAdd), {{own(0, 0, 16)}, {own(1, 0, 16)}}, {16, 14, 14}},
  });
  spec.groups.push_back({
      {PoolOp(PoolType::kMax, 3, 2, 1), {{ext(0, 8, 24)}, {ext(1, 0, 8)}}, {24, 7, 7}},
      {IdentityOp(), {{own(0, 0, 8), own(0, 8, 16)}}, {8, 7, 7}},
  });
  return query;
}

StageResult GoldenResult() {
  StageResult result;
  result.query_id = 0x0123456789abcdefULL;
  result.result.median_ms = 1.25;
  result.result.spread_ms = 0.0625;
  result.result.samples = 36;
  return result;
}

StageResult GoldenFailure() {
  StageResult result;
  result.query_id = 9;
  result.result.error = MeasureError::kOutOfMemory;
  result.result.error_message = "cudaMalloc: out of memory (2147483648 bytes)";
  return result;
}

// Decodes the recorded frame `name`, checks it is a T, and that encoding
// `expected` gives the recorded bytes. Returns the decoded value.
template <typename T>
T DecodeGolden(const std::string& name, const T& expected) {
  const std::string encoded = Encode(expected);
  const std::string bytes = FromHex(Golden(name, ToHex(encoded)));
  if (bytes.empty()) return {};
  EXPECT_EQ(ToHex(encoded), ToHex(bytes))
      << name << ": encoding changed: re-record only on purpose";
  auto decoded = Decode(bytes);
  if (const auto* error = std::get_if<DecodeError>(&decoded)) {
    ADD_FAILURE() << name << ": recorded frame no longer decodes: " << ToString(error->kind) << ": "
                  << error->message;
    return {};
  }
  const Message& message = std::get<Message>(decoded);
  const T* value = std::get_if<T>(&message);
  if (value == nullptr) {
    ADD_FAILURE() << name << ": recorded frame decodes to another message kind";
    return {};
  }
  EXPECT_EQ(ToHex(Encode(*value)), ToHex(bytes)) << name << ": re-encoding is not byte-identical";
  return *value;
}

TEST(ProtocolGoldenTest, HelloFrameDecodesAndReencodesByteForByte) {
  const Hello want = GoldenHello();
  const Hello got = DecodeGolden("hello.frame.hex", want);
  EXPECT_EQ(got.worker_id, want.worker_id);
  EXPECT_EQ(got.device.backend, want.device.backend);
  EXPECT_EQ(got.device.name, want.device.name);
  EXPECT_EQ(got.device.fingerprint, want.device.fingerprint);
  EXPECT_EQ(got.device.simulated, want.device.simulated);
  EXPECT_EQ(got.properties, want.properties);
  EXPECT_EQ(got.capacity, want.capacity);
  EXPECT_EQ(got.heartbeat_ms, want.heartbeat_ms);
  EXPECT_EQ(got.software, want.software);
  EXPECT_EQ(got.devices, want.devices);
  ASSERT_EQ(got.links.size(), 1u);
  EXPECT_EQ(got.links[0].kind, "nvlink");
  EXPECT_EQ(got.links[0].gb_per_s, 50);
  EXPECT_EQ(got.links[0].latency_us, 10);
  EXPECT_FALSE(got.links[0].measured);
}

TEST(ProtocolGoldenTest, QueryFrameDecodesAndReencodesByteForByte) {
  const StageQuery want = GoldenQuery();
  const StageQuery got = DecodeGolden("query.frame.hex", want);
  EXPECT_EQ(got.query_id, want.query_id);
  EXPECT_EQ(got.batch_size, want.batch_size);
  EXPECT_EQ(got.settings.Key(), want.settings.Key());
  EXPECT_EQ(got.settings.dtype, want.settings.dtype);
  EXPECT_EQ(got.settings.protocol, StageProtocol::kExecuted);
  EXPECT_TRUE(got.settings.warm_weights);
  EXPECT_EQ(got.stage.strategy, want.stage.strategy);
  EXPECT_EQ(got.stage.externals, want.stage.externals);
  ASSERT_EQ(got.stage.groups.size(), want.stage.groups.size());
  for (size_t g = 0; g < want.stage.groups.size(); ++g) {
    ASSERT_EQ(got.stage.groups[g].size(), want.stage.groups[g].size()) << "group " << g;
    for (size_t i = 0; i < want.stage.groups[g].size(); ++i) {
      EXPECT_EQ(got.stage.groups[g][i].op, want.stage.groups[g][i].op) << g << "." << i;
      EXPECT_EQ(got.stage.groups[g][i].inputs, want.stage.groups[g][i].inputs) << g << "." << i;
      EXPECT_EQ(got.stage.groups[g][i].output, want.stage.groups[g][i].output) << g << "." << i;
    }
  }
  EXPECT_EQ(got.stage.Key(), want.stage.Key());
}

TEST(ProtocolGoldenTest, ResultFramesDecodeAndReencodeByteForByte) {
  for (const auto& [name, want] : {std::pair{"result_ok.frame.hex", GoldenResult()},
                                   std::pair{"result_error.frame.hex", GoldenFailure()}}) {
    const StageResult got = DecodeGolden(name, want);
    EXPECT_EQ(got.query_id, want.query_id) << name;
    EXPECT_EQ(got.result.median_ms, want.result.median_ms) << name;
    EXPECT_EQ(got.result.spread_ms, want.result.spread_ms) << name;
    EXPECT_EQ(got.result.samples, want.result.samples) << name;
    EXPECT_EQ(got.result.error, want.result.error) << name;
    EXPECT_EQ(got.result.error_message, want.result.error_message) << name;
  }
}

}  // namespace
}  // namespace ios::schema
