// The wire protocol: exact round trips, the guarantees of Decode on hostile
// input, and field-naming errors for well-formed but invalid content.
#include "schema/protocol.h"

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
#include "tests/testing/ops.h"

namespace ios::schema {
namespace {

using ios::testing::ConvOp;
using ios::testing::EltwiseOp;
using ios::testing::IdentityOp;
using ios::testing::PoolOp;
using Kind = DecodeError::Kind;

// ------------------------------------------------------------------ helpers

Message Decoded(std::string_view bytes) {
  auto decoded = Decode(bytes);
  if (auto* error = std::get_if<DecodeError>(&decoded)) {
    ADD_FAILURE() << "decode failed: " << ToString(error->kind) << ": " << error->message;
    return Shutdown{};
  }
  return std::get<Message>(std::move(decoded));
}

template <typename T>
T RoundTrip(const T& value) {
  Message message = Decoded(Encode(value));
  EXPECT_TRUE(std::holds_alternative<T>(message)) << "wrong message kind back";
  if (!std::holds_alternative<T>(message)) return T{};
  return std::get<T>(std::move(message));
}

DecodeError Failure(std::string_view bytes) {
  auto decoded = Decode(bytes);
  if (!std::holds_alternative<DecodeError>(decoded)) {
    ADD_FAILURE() << "decoded, but an error was expected";
    return {};
  }
  return std::get<DecodeError>(decoded);
}

void ExpectSameSpec(const StageSpec& a, const StageSpec& b) {
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

SliceRef External(int index, int begin, int end) { return {true, index, begin, end}; }
SliceRef Internal(int index, int begin, int end) { return {false, index, begin, end}; }

OpParams SequentialOp(std::vector<OpParams> chain) {
  OpParams op;
  op.kind = OpKind::kSequential;
  op.chain = std::move(chain);
  return op;
}

OpParams ActivationOp(Activation act) {
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
StageSpec SampleStage() {
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

StageQuery SampleQuery() {
  StageQuery query;
  query.query_id = 0x1234567890abcdefULL;
  query.batch_size = 32;
  query.settings = {3, 7, 5, "float16"};
  query.stage = SampleStage();
  return query;
}

Hello SampleHello() {
  Hello hello;
  hello.worker_id = "gpu-host-3:4242:1";
  hello.device = {"cuda", "NVIDIA H100 80GB HBM3", "cuda|H100|sm90|132|81559MiB|13.0|9.19", false};
  hello.properties = {{"sm_count", "132"}, {"memory", "81559 MiB"}, {"", "empty key"}};
  hello.capacity = 4;
  hello.heartbeat_ms = 250;
  hello.software = "ios-worker 0.1.0";
  return hello;
}

StageResult SampleResult() {
  StageResult result;
  result.query_id = 77;
  result.result.median_ms = 0.123456789;
  result.result.spread_ms = 0.0042;
  result.result.samples = 36;
  return result;
}

// Distinct stages of a zoo model at default search options.
std::vector<StageSpec> ZooStages(const std::string& model, size_t max_count = SIZE_MAX) {
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

void ExpectZooStagesRoundTrip(const std::string& model, size_t max_count = SIZE_MAX) {
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

// --------------------------------------------------------------- round trips

TEST(ProtocolTest, HelloRoundTripsFieldByField) {
  const Hello sent = SampleHello();
  const Hello got = RoundTrip(sent);
  EXPECT_EQ(got.worker_id, sent.worker_id);
  EXPECT_EQ(got.device.backend, sent.device.backend);
  EXPECT_EQ(got.device.name, sent.device.name);
  EXPECT_EQ(got.device.fingerprint, sent.device.fingerprint);
  EXPECT_EQ(got.device.simulated, sent.device.simulated);
  EXPECT_EQ(got.properties, sent.properties);
  EXPECT_EQ(got.capacity, sent.capacity);
  EXPECT_EQ(got.heartbeat_ms, sent.heartbeat_ms);
  EXPECT_EQ(got.software, sent.software);

  Hello simulated = SampleHello();
  simulated.device = {"sim", "sim:v100", "sim:v100|80sm", true};
  simulated.properties.clear();
  EXPECT_TRUE(RoundTrip(simulated).device.simulated);
  EXPECT_TRUE(RoundTrip(simulated).properties.empty());
}

TEST(ProtocolTest, HeartbeatRoundTrips) {
  EXPECT_EQ(RoundTrip(Heartbeat{1234}).interval_ms, 1234u);
}

TEST(ProtocolTest, StageQueryRoundTripsFieldByField) {
  const StageQuery sent = SampleQuery();
  const StageQuery got = RoundTrip(sent);
  EXPECT_EQ(got.query_id, sent.query_id);
  EXPECT_EQ(got.batch_size, sent.batch_size);
  EXPECT_EQ(got.settings.warmup, sent.settings.warmup);
  EXPECT_EQ(got.settings.number, sent.settings.number);
  EXPECT_EQ(got.settings.repeat, sent.settings.repeat);
  EXPECT_EQ(got.settings.dtype, sent.settings.dtype);
  ExpectSameSpec(got.stage, sent.stage);
}

TEST(ProtocolTest, EncodeQueryWritesTheSameBytesAsEncodingAStageQuery) {
  const StageQuery query = SampleQuery();
  EXPECT_EQ(EncodeQuery(query.query_id, query.stage, query.batch_size, query.settings),
            Encode(query));
}

TEST(ProtocolTest, MergeStageRoundTrips) {
  StageQuery query = SampleQuery();
  query.stage.strategy = Strategy::kMerge;
  query.stage.externals = {{64, 17, 17}};
  query.stage.groups = {{{ConvOp(32, 1), {{External(0, 0, 64)}}, {32, 17, 17}}},
                        {{ConvOp(48, 3, 1, 1), {{External(0, 0, 64)}}, {48, 17, 17}}},
                        {{ConvOp(16, 5, 1, 2), {{External(0, 0, 64)}}, {16, 17, 17}}}};
  ExpectSameSpec(RoundTrip(query).stage, query.stage);
}

TEST(ProtocolTest, OkResultRoundTripsExactly) {
  const StageResult sent = SampleResult();
  const StageResult got = RoundTrip(sent);
  EXPECT_EQ(got.query_id, sent.query_id);
  EXPECT_TRUE(got.result.ok());
  EXPECT_EQ(got.result.median_ms, sent.result.median_ms);  // bit-exact doubles
  EXPECT_EQ(got.result.spread_ms, sent.result.spread_ms);
  EXPECT_EQ(got.result.samples, sent.result.samples);
}

TEST(ProtocolTest, EveryErrorKindRoundTripsWithItsMessage) {
  for (MeasureError error : {MeasureError::kOutOfMemory, MeasureError::kUnsupported,
                             MeasureError::kBackendFailure, MeasureError::kTimeout}) {
    StageResult sent{9, {}};
    sent.result.error = error;
    sent.result.error_message = std::string("failed: ") + ToString(error);
    const StageResult got = RoundTrip(sent);
    EXPECT_EQ(got.query_id, 9u);
    EXPECT_EQ(got.result.error, error);
    EXPECT_EQ(got.result.error_message, sent.result.error_message);
  }
}

TEST(ProtocolTest, LongErrorTextIsCutSoTheAnswerStillDecodes) {
  StageResult sent{5, {}};
  sent.result.error = MeasureError::kBackendFailure;
  sent.result.error_message = std::string(100000, 'x');
  const StageResult got = RoundTrip(sent);
  EXPECT_EQ(got.result.error, MeasureError::kBackendFailure);
  EXPECT_EQ(got.result.error_message, std::string(4096, 'x'));
}

TEST(ProtocolTest, EveryRejectReasonAndShutdownRoundTrip) {
  for (RejectReason reason :
       {RejectReason::kVersionMismatch, RejectReason::kMalformed, RejectReason::kUnknownWorker}) {
    const Reject got = RoundTrip(Reject{reason, std::string("because ") + ToString(reason)});
    EXPECT_EQ(got.reason, reason);
    EXPECT_EQ(got.message, std::string("because ") + ToString(reason));
  }
  EXPECT_EQ(RoundTrip(Shutdown{"coordinator exiting"}).reason, "coordinator exiting");
  EXPECT_EQ(RoundTrip(Shutdown{""}).reason, "");
}

TEST(ProtocolTest, EveryInceptionStageRoundTripsWithTheSameKey) {
  ExpectZooStagesRoundTrip("inception_v3");
}

TEST(ProtocolTest, EverySqueezenetStageRoundTripsWithTheSameKey) {
  ExpectZooStagesRoundTrip("squeezenet");
}

TEST(ProtocolTest, SampledNasnetStagesRoundTripWithTheSameKey) {
  ExpectZooStagesRoundTrip("nasnet", 2000);
}

TEST(ProtocolTest, UnalignedFramesDecode) {
  const std::string bytes = Encode(SampleQuery());
  std::string shifted = "x" + bytes;  // data() + 1 is not 8-byte aligned
  const Message message = Decoded(std::string_view(shifted).substr(1));
  ASSERT_TRUE(std::holds_alternative<StageQuery>(message));
  EXPECT_EQ(std::get<StageQuery>(message).stage.Key(), SampleStage().Key());
}

// ------------------------------------------------------------ frame checks

TEST(ProtocolTest, AnotherVersionIsRefusedWithItsNumber) {
  for (uint32_t version : {2u, 0xffffffffu}) {
    const DecodeError error = Failure(EncodeWithVersion(SampleQuery(), version));
    EXPECT_EQ(error.kind, Kind::kVersionMismatch);
    EXPECT_EQ(error.version, version);
  }
  // The version is checked before the body: an invalid body still reports it.
  Heartbeat invalid{0};
  const DecodeError error = Failure(EncodeWithVersion(invalid, 7));
  EXPECT_EQ(error.kind, Kind::kVersionMismatch);
  EXPECT_EQ(error.version, 7u);
}

TEST(ProtocolTest, AMessageWithoutAVersionIsMalformedNotAnotherVersion) {
  // Version 0 is what capnp reads from an unset field, e.g. a null root.
  EXPECT_EQ(Failure(EncodeWithVersion(Heartbeat{100}, 0)).kind, Kind::kMalformed);
  std::string null_root(16, '\0');  // one segment of one word: a null pointer
  null_root[4] = 1;                 // the segment table: size 1 word
  const DecodeError error = Failure(null_root);
  EXPECT_EQ(error.kind, Kind::kMalformed);
  EXPECT_EQ(error.message, "no protocol version (field 0 unset)");
}

TEST(ProtocolTest, OversizedFramesAreRefusedUnread) {
  const std::string huge(kMaxMessageBytes + 8, '\0');
  EXPECT_EQ(Failure(huge).kind, Kind::kOversized);
  // A frame of exactly the limit is read (and here found malformed).
  EXPECT_EQ(Failure(std::string_view(huge).substr(0, kMaxMessageBytes)).kind, Kind::kMalformed);
}

TEST(ProtocolTest, FramesThatAreNotWholeWordsAreMalformed) {
  const std::string bytes = Encode(SampleHello());
  for (size_t size : {0, 1, 2, 3, 4, 5, 6, 7, 9, 15, 17}) {
    EXPECT_EQ(Failure(std::string_view(bytes).substr(0, size)).kind, Kind::kMalformed) << size;
  }
  EXPECT_EQ(Failure(bytes + "abc").kind, Kind::kMalformed);
}

TEST(ProtocolTest, BytesAfterTheMessageAreMalformed) {
  EXPECT_EQ(Failure(Encode(Heartbeat{100}) + std::string(8, '\0')).kind, Kind::kMalformed);
}

TEST(ProtocolTest, EveryTruncationOfAValidMessageIsAnError) {
  for (const std::string& bytes :
       {Encode(SampleQuery()), Encode(SampleHello()), Encode(SampleResult())}) {
    for (size_t size = 0; size < bytes.size(); ++size) {
      auto decoded = Decode(std::string_view(bytes).substr(0, size));
      EXPECT_TRUE(std::holds_alternative<DecodeError>(decoded)) << "length " << size;
    }
  }
}

// -------------------------------------------------------------------- fuzz

// Whatever Decode accepts must be usable as is: a stage keys, describes and
// survives another round trip unchanged.
void ExpectUsable(const Message& message) {
  if (const auto* query = std::get_if<StageQuery>(&message)) {
    const std::string key = query->stage.Key();
    EXPECT_FALSE(query->stage.Describe().empty());
    EXPECT_GT(query->stage.OperatorCount(), 0);
    const Message again = Decoded(Encode(*query));
    ASSERT_TRUE(std::holds_alternative<StageQuery>(again));
    EXPECT_EQ(std::get<StageQuery>(again).stage.Key(), key);
  } else {
    EXPECT_TRUE(std::holds_alternative<Message>(Decode(Encode(message))));
  }
}

struct FuzzTally {
  int decoded = 0, invalid = 0, malformed = 0, other = 0;
  void Count(const std::variant<Message, DecodeError>& outcome) {
    if (const auto* message = std::get_if<Message>(&outcome)) {
      ++decoded;
      ExpectUsable(*message);
      return;
    }
    const DecodeError& error = std::get<DecodeError>(outcome);
    EXPECT_FALSE(error.message.empty()) << ToString(error.kind);
    (error.kind == Kind::kInvalid ? invalid : error.kind == Kind::kMalformed ? malformed : other)++;
  }
};

TEST(ProtocolFuzzTest, RandomBytesNeverCrash) {
  std::mt19937_64 rng(20240611);
  FuzzTally tally;
  std::string bytes;
  for (int i = 0; i < 6000; ++i) {
    const size_t words = rng() % 64;
    bytes.resize(words * 8 + (i % 10 == 0 ? rng() % 8 : 0));
    for (char& c : bytes) c = static_cast<char>(rng());
    // Two thirds of the time a plausible segment table, and half of those
    // also a root Envelope of our version with a random body: random bytes
    // then reach the body's pointers and checks, not just the header.
    if (i % 3 != 0 && words > 4) {
      const uint32_t table[2] = {0, static_cast<uint32_t>(words - 1)};
      std::memcpy(bytes.data(), table, sizeof table);
      if (i % 3 == 1) {
        const uint64_t root = uint64_t{1} << 32 | uint64_t{1} << 48;  // struct: 1 data, 1 pointer
        const uint64_t data = kProtocolVersion | (rng() % 6) << 32;   // version, which()
        // The body: a struct right after the pointer, of random small size.
        const uint64_t body = (rng() % 3) << 32 | (rng() % 4) << 48;
        std::memcpy(bytes.data() + 8, &root, 8);
        std::memcpy(bytes.data() + 16, &data, 8);
        std::memcpy(bytes.data() + 24, &body, 8);
      }
    }
    tally.Count(Decode(bytes));
  }
  EXPECT_GT(tally.decoded, 50);
  EXPECT_GT(tally.invalid, 100);
  EXPECT_GT(tally.malformed, 1000);
  EXPECT_EQ(tally.decoded + tally.invalid + tally.malformed + tally.other, 6000);
}

// Mutations that target capnp's encoding: bytes, whole words, and pointers
// with wild offsets or element counts.
std::string Mutate(std::string bytes, std::mt19937_64& rng) {
  const size_t words = bytes.size() / 8;
  const auto word_at = [&](size_t w) { return bytes.data() + 8 * w; };
  const auto set_word = [&](size_t w, uint64_t value) { std::memcpy(word_at(w), &value, 8); };
  const size_t w = 1 + rng() % (words - 1);  // never the segment table, usually
  switch (rng() % 8) {
    case 0:  // a few random bytes
      for (int k = 1 + static_cast<int>(rng() % 4); k > 0; --k) {
        bytes[rng() % bytes.size()] = static_cast<char>(rng());
      }
      break;
    case 1:  // one bit
      bytes[rng() % bytes.size()] ^= static_cast<char>(1 << (rng() % 8));
      break;
    case 2:  // insert a word
      bytes.insert(8 * w, std::string(8, static_cast<char>(rng())));
      break;
    case 3:  // delete a word
      bytes.erase(8 * w, 8);
      break;
    case 4: {  // struct pointer with a huge (or negative) offset
      const int32_t offset = static_cast<int32_t>(rng() % 2 ? (1 << 29) - 1 : -(1 << 29));
      set_word(w, (static_cast<uint64_t>(static_cast<uint32_t>(offset) << 2)) |
                      (static_cast<uint64_t>(rng() & 0xffffffff) << 32));
      break;
    }
    case 5: {  // list pointer, offset 0, huge element count, random element size
      const uint64_t count = (1u << 29) - 1 - (rng() % 16);
      set_word(w, 1 | (static_cast<uint64_t>(rng() % 8) << 32) | (count << 35));
      break;
    }
    case 6: {  // list of zero-sized elements: cheap on the wire, costly to walk
      set_word(w, 1 | (uint64_t{0} << 32) | (uint64_t{(1u << 29) - 1} << 35));
      break;
    }
    case 7: {  // far pointer to a segment that does not exist, or the segment table
      if (rng() % 2) {
        set_word(w, 2 | (static_cast<uint64_t>(rng() % 1000) << 3) | (rng() << 32));
      } else {
        const uint32_t table[2] = {static_cast<uint32_t>(rng() % 4),
                                   static_cast<uint32_t>(rng() % (2 * words))};
        std::memcpy(bytes.data(), table, sizeof table);
      }
      break;
    }
  }
  return bytes;
}

TEST(ProtocolFuzzTest, MutatedMessagesDecodeOrFailWithoutCrashing) {
  std::mt19937_64 rng(7);
  StageQuery small;
  small.stage.externals = {{8, 4, 4}};
  small.stage.groups = {{{ConvOp(8, 3, 1, 1), {{External(0, 0, 8)}}, {8, 4, 4}}}};
  const std::vector<std::string> seeds = {Encode(SampleQuery()), Encode(small),
                                          Encode(SampleHello()), Encode(SampleResult()),
                                          Encode(Reject{RejectReason::kMalformed, "no"})};
  FuzzTally tally;
  const int kCases = 8000;
  for (int i = 0; i < kCases; ++i) {
    std::string bytes = seeds[static_cast<size_t>(i) % seeds.size()];
    for (int rounds = 1 + static_cast<int>(rng() % 3); rounds > 0 && bytes.size() > 16; --rounds) {
      bytes = Mutate(std::move(bytes), rng);
    }
    tally.Count(Decode(bytes));
    if (::testing::Test::HasFatalFailure()) return;
  }
  // Every outcome occurs, so the mutations reach the reader and the checks.
  EXPECT_GT(tally.decoded, 100);
  EXPECT_GT(tally.invalid, 100);
  EXPECT_GT(tally.malformed, 1000);
}

// ------------------------------------------------------ invalid content

struct InvalidCase {
  const char* name;
  void (*edit)(StageQuery&);
  const char* expected;  // the start of the error message: the field's path
};

const InvalidCase kInvalidQueries[] = {
    {"external index out of range",
     [](StageQuery& q) { q.stage.groups[0][0].inputs[0][0].index = 7; },
     "query.stage.groups[0].ops[0].inputs[0][0].index: 7 out of range (2 externals)"},
    {"negative external index", [](StageQuery& q) { q.stage.groups[1][0].inputs[1][0].index = -1; },
     "query.stage.groups[1].ops[0].inputs[1][0].index: -1 out of range"},
    {"internal index not earlier",
     [](StageQuery& q) { q.stage.groups[0][1].inputs[0][0].index = 1; },
     "query.stage.groups[0].ops[1].inputs[0][0].index: 1 is not an earlier op"},
    {"begin not below end", [](StageQuery& q) { q.stage.groups[2][0].inputs[0][1].begin = 32; },
     "query.stage.groups[2].ops[0].inputs[0][1].begin: 32 not below end 32"},
    {"negative begin", [](StageQuery& q) { q.stage.groups[0][0].inputs[0][0].begin = -4; },
     "query.stage.groups[0].ops[0].inputs[0][0].begin: -4 is negative"},
    {"end beyond channels", [](StageQuery& q) { q.stage.groups[0][1].inputs[0][0].end = 33; },
     "query.stage.groups[0].ops[1].inputs[0][0].end: 33 beyond the 32 channels"},
    {"negative channel", [](StageQuery& q) { q.stage.externals[1].c = -16; },
     "query.stage.externals[1].c: -16 out of range"},
    {"huge height", [](StageQuery& q) { q.stage.externals[0].h = 1 << 20; },
     "query.stage.externals[0].h: 1048576 out of range"},
    {"output inconsistent", [](StageQuery& q) { q.stage.groups[1][0].output.c = 64; },
     "query.stage.groups[1].ops[0].output: declared 64x14x14 but the inputs give 48x14x14"},
    {"summed slices differ", [](StageQuery& q) { q.stage.groups[2][0].inputs[0][1].end = 30; },
     "query.stage.groups[2].ops[0].inputs[0][1]: summed slices differ"},
    {"empty sequential chain", [](StageQuery& q) { q.stage.groups[0][1].op.chain.clear(); },
     "query.stage.groups[0].ops[1].op.chain: a sequential op needs at least one step"},
    {"sequential inside sequential",
     [](StageQuery& q) { q.stage.groups[0][1].op.chain[0] = SequentialOp({IdentityOp()}); },
     "query.stage.groups[0].ops[1] (sequential step 0): type: sequential cannot be a step"},
    {"chain on a conv", [](StageQuery& q) { q.stage.groups[0][0].op.chain = {IdentityOp()}; },
     "query.stage.groups[0].ops[0].op.chain: a conv op has no steps"},
    {"zero kernel in a chain step",
     [](StageQuery& q) { q.stage.groups[0][1].op.chain[1].conv.kernel.w = 0; },
     "query.stage.groups[0].ops[1].op.chain[1].conv.kernelW: 0 out of range"},
    {"zero stride", [](StageQuery& q) { q.stage.groups[1][0].op.pool.stride.h = 0; },
     "query.stage.groups[1].ops[0].op.pool.strideH: 0 out of range"},
    {"negative padding", [](StageQuery& q) { q.stage.groups[0][0].op.conv.padding.h = -1; },
     "query.stage.groups[0].ops[0].op.conv.padH: -1 out of range"},
    {"dilated span overflows",
     [](StageQuery& q) { q.stage.groups[0][0].op.conv.dilation.h = 60000; },
     "query.stage.groups[0].ops[0].op.conv.kernelH: dilated span 120001 too large"},
    {"zero out channels", [](StageQuery& q) { q.stage.groups[0][0].op.conv.out_channels = 0; },
     "query.stage.groups[0].ops[0].op.conv.outChannels: 0 out of range"},
    {"conv groups do not divide", [](StageQuery& q) { q.stage.groups[0][0].op.conv.groups = 3; },
     "query.stage.groups[0].ops[0]: groups: 3 does not divide"},
    {"eltwise with one term", [](StageQuery& q) { q.stage.groups[0][2].inputs.pop_back(); },
     "query.stage.groups[0].ops[2]: inputs: eltwise needs at least two terms"},
    {"input placeholder in a stage",
     [](StageQuery& q) { q.stage.groups[2][0].op.kind = OpKind::kInput; },
     "query.stage.groups[2].ops[0]: type: an input placeholder"},
    {"no input", [](StageQuery& q) { q.stage.groups[2][0].inputs.clear(); },
     "query.stage.groups[2].ops[0].inputs: an op needs at least one input term"},
    {"empty term", [](StageQuery& q) { q.stage.groups[1][0].inputs[1].clear(); },
     "query.stage.groups[1].ops[0].inputs[1]: a term needs at least one slice"},
    {"empty group", [](StageQuery& q) { q.stage.groups[1].clear(); },
     "query.stage.groups[1].ops: a group needs at least one op"},
    {"no group", [](StageQuery& q) { q.stage.groups.clear(); },
     "query.stage.groups: a stage needs at least one group"},
    {"too many groups", [](StageQuery& q) { q.stage.groups.resize(65, q.stage.groups[2]); },
     "query.stage.groups: 65 entries, at most 64"},
    {"too many ops", [](StageQuery& q) { q.stage.groups[2].resize(65, q.stage.groups[2][0]); },
     "query.stage.groups[2].ops: 65 entries, at most 64"},
    {"merge of a group of several ops", [](StageQuery& q) { q.stage.strategy = Strategy::kMerge; },
     "query.stage.groups[0].ops: a merge stage has one op per group"},
    {"batch size zero", [](StageQuery& q) { q.batch_size = 0; }, "query.batchSize: 0 out of range"},
    {"empty dtype", [](StageQuery& q) { q.settings.dtype.clear(); },
     "query.dtype: must not be empty"},
    {"too much warmup", [](StageQuery& q) { q.settings.warmup = 1001; },
     "query.warmup: 1001 out of range"},
    {"no runs", [](StageQuery& q) { q.settings.number = 0; }, "query.number: 0 out of range"},
    {"negative repeat", [](StageQuery& q) { q.settings.repeat = -1; },
     "query.repeat: -1 out of range"},
    {"unknown op kind (a bad cast)",
     [](StageQuery& q) { q.stage.groups[0][0].op.kind = static_cast<OpKind>(42); },
     "query.stage.groups[0].ops[0].op.kind: unknown value 65535"},
};

TEST(ProtocolTest, InvalidStageQueriesAreRefusedNamingTheField) {
  ASSERT_TRUE(std::holds_alternative<Message>(Decode(Encode(SampleQuery()))));
  for (const InvalidCase& c : kInvalidQueries) {
    StageQuery query = SampleQuery();
    c.edit(query);
    const DecodeError error = Failure(Encode(query));
    EXPECT_EQ(error.kind, Kind::kInvalid) << c.name << ": " << error.message;
    EXPECT_EQ(error.message.rfind(c.expected, 0), 0u)
        << c.name << "\n  got:      " << error.message << "\n  expected: " << c.expected;
  }
}

TEST(ProtocolTest, InvalidMergeStagesAreRefused) {
  StageQuery query = SampleQuery();
  query.stage.strategy = Strategy::kMerge;
  query.stage.externals = {{64, 17, 17}, {64, 17, 17}};
  const StageOp a{ConvOp(32, 1), {{External(0, 0, 64)}}, {32, 17, 17}};
  const StageOp b{ConvOp(48, 3, 1, 1), {{External(0, 0, 64)}}, {48, 17, 17}};
  const StageOp other_input{ConvOp(48, 3, 1, 1), {{External(1, 0, 64)}}, {48, 17, 17}};
  const StageOp strided{ConvOp(48, 3, 2, 1), {{External(0, 0, 64)}}, {48, 9, 9}};
  const StageOp relu{ConvOp(48, 3, 1, 1, Activation::kNone), {{External(0, 0, 64)}}, {48, 17, 17}};
  const StageOp pool{PoolOp(PoolType::kMax, 3, 1, 1), {{External(0, 0, 64)}}, {64, 17, 17}};
  const struct {
    std::vector<std::vector<StageOp>> groups;
    const char* expected;
  } cases[] = {
      {{{a}}, "query.stage.strategy: merge needs two or more operators"},
      {{{a}, {other_input}},
       "query.stage.groups[1].ops[0].inputs[0][0]: merged convolutions must all read the same "
       "slice"},
      {{{a}, {strided}},
       "query.stage.groups[1].ops[0].output: merged convolutions must have equal output "
       "resolution"},
      {{{a}, {relu}}, "query.stage.groups[1].ops[0].op.conv.activation: merged"},
      {{{a}, {pool}}, "query.stage.groups[1].ops[0].op: a merge stage runs only convolutions"},
  };
  query.stage.groups = {{a}, {b}};
  ASSERT_TRUE(std::holds_alternative<Message>(Decode(Encode(query))));
  for (const auto& c : cases) {
    query.stage.groups = c.groups;
    const DecodeError error = Failure(Encode(query));
    EXPECT_EQ(error.kind, Kind::kInvalid) << error.message;
    EXPECT_EQ(error.message.rfind(c.expected, 0), 0u) << error.message;
  }
}

TEST(ProtocolTest, InvalidHellosHeartbeatsAndResultsAreRefusedNamingTheField) {
  const auto expect_invalid = [](const Message& message, const std::string& expected) {
    const DecodeError error = Failure(Encode(message));
    EXPECT_EQ(error.kind, Kind::kInvalid) << error.message;
    EXPECT_EQ(error.message.rfind(expected, 0), 0u) << error.message;
  };
  Hello hello = SampleHello();
  hello.capacity = 0;
  expect_invalid(hello, "hello.capacity: 0 out of range [1, 1024]");
  hello = SampleHello();
  hello.heartbeat_ms = 5;
  expect_invalid(hello, "hello.heartbeatMs: 5 out of range");
  hello = SampleHello();
  hello.device.fingerprint.clear();
  expect_invalid(hello, "hello.fingerprint: must not be empty");
  hello = SampleHello();
  hello.properties[1].second = std::string(5000, 'v');
  expect_invalid(hello, "hello.properties[1].value: 5000 bytes, at most 4096");
  hello = SampleHello();
  hello.properties.resize(300);
  expect_invalid(hello, "hello.properties: 300 entries, at most 256");

  expect_invalid(Heartbeat{0}, "heartbeat.intervalMs: 0 out of range");
  expect_invalid(Heartbeat{600001}, "heartbeat.intervalMs: 600001 out of range");

  StageResult result = SampleResult();
  result.result.median_ms = std::nan("");
  expect_invalid(result, "result.ok.medianMs: nan is not a finite time");
  result = SampleResult();
  result.result.spread_ms = -1;
  expect_invalid(result, "result.ok.spreadMs:");
  result = SampleResult();
  result.result.median_ms = std::numeric_limits<double>::infinity();
  expect_invalid(result, "result.ok.medianMs:");
  result = SampleResult();
  result.result.samples = -3;
  expect_invalid(result, "result.ok.samples: -3 is negative");
  result = SampleResult();
  result.result.error = static_cast<MeasureError>(17);
  expect_invalid(result, "result.error.kind: unknown value 65535");

  expect_invalid(Reject{static_cast<RejectReason>(5), "?"}, "reject.reason: unknown value 65535");
}

// Messages no encoder of ours writes, built with the generated builders.
std::string Build(const std::function<void(wire::Envelope::Builder)>& fill) {
  capnp::MallocMessageBuilder builder;
  auto envelope = builder.initRoot<wire::Envelope>();
  envelope.setVersion(kProtocolVersion);
  fill(envelope);
  const kj::Array<capnp::word> words = capnp::messageToFlatArray(builder);
  return std::string(reinterpret_cast<const char*>(words.asBytes().begin()),
                     words.asBytes().size());
}

// Fills `stage` with one valid conv reading one external; returns the op.
wire::Op::Builder OneConvStage(wire::Stage::Builder stage) {
  auto external = stage.initExternals(1)[0];
  external.setC(8);
  external.setH(4);
  external.setW(4);
  auto op = stage.initGroups(1)[0].initOps(1)[0];
  auto slice = op.initInputs(1)[0].initSlices(1)[0];
  slice.setExternal(true);
  slice.setEnd(8);
  auto output = op.initOutput();
  output.setC(8);
  output.setH(4);
  output.setW(4);
  auto params = op.initOp();
  params.setKind(wire::OpKind::CONV);
  auto conv = params.initConv();
  conv.setOutChannels(8);
  for (auto set : {&wire::Conv::Builder::setKernelH, &wire::Conv::Builder::setKernelW,
                   &wire::Conv::Builder::setStrideH, &wire::Conv::Builder::setStrideW,
                   &wire::Conv::Builder::setDilationH, &wire::Conv::Builder::setDilationW,
                   &wire::Conv::Builder::setGroups}) {
    (conv.*set)(1);
  }
  params.initPool();
  return params;
}

std::string OneConvQuery(const std::function<void(wire::Op::Builder)>& edit) {
  return Build([&](wire::Envelope::Builder envelope) {
    auto query = envelope.initQuery();
    query.setBatchSize(1);
    query.setDtype("float32");
    query.setNumber(1);
    query.setRepeat(1);
    edit(OneConvStage(query.initStage()));
  });
}

TEST(ProtocolTest, UnknownEnumerantsFromANewerPeerAreInvalid) {
  ASSERT_TRUE(std::holds_alternative<Message>(Decode(OneConvQuery([](wire::Op::Builder) {}))));
  const struct {
    std::function<void(wire::Op::Builder)> edit;
    const char* expected;
  } cases[] = {
      {[](wire::Op::Builder op) { op.setKind(static_cast<wire::OpKind>(7)); },
       "query.stage.groups[0].ops[0].op.kind: unknown value 7"},
      {[](wire::Op::Builder op) { op.getConv().setActivation(static_cast<wire::Activation>(4)); },
       "query.stage.groups[0].ops[0].op.conv.activation: unknown value 4"},
      {[](wire::Op::Builder op) { op.getPool().setType(static_cast<wire::PoolType>(9)); },
       "query.stage.groups[0].ops[0].op.pool.type: unknown value 9"},
      {[](wire::Op::Builder op) { op.setEltwise(static_cast<wire::EltwiseType>(2)); },
       "query.stage.groups[0].ops[0].op.eltwise: unknown value 2"},
  };
  for (const auto& c : cases) {
    const DecodeError error = Failure(OneConvQuery(c.edit));
    EXPECT_EQ(error.kind, Kind::kInvalid);
    EXPECT_EQ(error.message, c.expected);
  }
  const DecodeError strategy = Failure(Build([](wire::Envelope::Builder envelope) {
    auto query = envelope.initQuery();
    OneConvStage(query.initStage()).getConv();
    query.getStage().setStrategy(static_cast<wire::Strategy>(2));
  }));
  EXPECT_EQ(strategy.message, "query.stage.strategy: unknown value 2");
  const DecodeError reason = Failure(Build([](wire::Envelope::Builder envelope) {
    envelope.initReject().setReason(static_cast<wire::RejectReason>(3));
  }));
  EXPECT_EQ(reason.message, "reject.reason: unknown value 3");
  const DecodeError kind = Failure(Build([](wire::Envelope::Builder envelope) {
    envelope.initResult().initError().setKind(static_cast<wire::ErrorKind>(4));
  }));
  EXPECT_EQ(kind.message, "result.error.kind: unknown value 4");
}

TEST(ProtocolTest, UnknownMessageKindIsInvalid) {
  std::string bytes = Encode(Heartbeat{100});
  uint16_t discriminant = 0;
  std::memcpy(&discriminant, bytes.data() + kDiscriminantOffset, 2);
  ASSERT_EQ(discriminant, static_cast<uint16_t>(wire::Envelope::HEARTBEAT)) << "layout changed";
  discriminant = 40;
  std::memcpy(bytes.data() + kDiscriminantOffset, &discriminant, 2);
  const DecodeError error = Failure(bytes);
  EXPECT_EQ(error.kind, Kind::kInvalid);
  EXPECT_EQ(error.message, "envelope: unknown message kind 40");
}

// A sequential op whose chain nests `levels` chains, each of one step.
std::string NestedChainQuery(int levels) {
  return OneConvQuery([levels](wire::Op::Builder op) {
    op.setKind(wire::OpKind::SEQUENTIAL);
    for (int depth = 0; depth < levels; ++depth) {
      op = op.initChain(1)[0];
      op.setKind(depth + 1 < levels ? wire::OpKind::SEQUENTIAL : wire::OpKind::IDENTITY);
    }
  });
}

TEST(ProtocolTest, TooDeepChainNestingIsInvalidNotAStackOverflow) {
  const DecodeError error = Failure(NestedChainQuery(40));
  EXPECT_EQ(error.kind, Kind::kInvalid);
  EXPECT_EQ(error.message,
            "query.stage.groups[0].ops[0].op.chain[0].chain[0].chain[0].chain[0].chain[0]"
            ".chain[0].chain[0].chain[0].chain: nested deeper than 8 levels");
  // At the depth limit, capnp's own nesting limit has not cut in yet: the
  // message is read, and refused by shape inference (no nested sequentials).
  const DecodeError at_limit = Failure(NestedChainQuery(8));
  EXPECT_EQ(at_limit.kind, Kind::kInvalid);
  EXPECT_EQ(at_limit.message.rfind("query.stage.groups[0].ops[0] (sequential step 0): type: "
                                   "sequential cannot be a step",
                                   0),
            0u)
      << at_limit.message;
  // One level is a valid sequential op.
  EXPECT_TRUE(std::holds_alternative<Message>(Decode(NestedChainQuery(1))));
}

// A list of zero-sized elements costs nothing on the wire whatever its count.
std::string QueryWithVoidOps(unsigned count) {
  return Build([count](wire::Envelope::Builder envelope) {
    capnp::AnyStruct::Builder group = envelope.initQuery().initStage().initGroups(1)[0];
    group.getPointerSection()[0].initAs<capnp::List<capnp::Void>>(count);
  });
}

TEST(ProtocolTest, HugeListsAreRefusedBeforeTheyAreRead) {
  const std::string few = QueryWithVoidOps(100);
  const DecodeError by_count = Failure(few);
  EXPECT_EQ(by_count.kind, Kind::kInvalid);
  EXPECT_EQ(by_count.message, "query.stage.groups[0].ops: 100 entries, at most 64");
  // Too many to even count against the traversal limit of a small frame.
  const std::string many = QueryWithVoidOps(100000);
  EXPECT_EQ(many.size(), few.size());
  EXPECT_EQ(Failure(many).kind, Kind::kMalformed);
}

}  // namespace
}  // namespace ios::schema
