// Round trips of every message kind and the frame-level checks.
#include "common/activation.h"
#include "common/op_kinds.h"
#include "tests/schema/protocol_testing.h"

namespace ios::schema {
namespace {

using namespace protocol_testing;

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
  EXPECT_EQ(got.settings.max_repeat, sent.settings.max_repeat);
  EXPECT_DOUBLE_EQ(got.settings.max_relative_spread, sent.settings.max_relative_spread);
  EXPECT_EQ(got.settings.Key(), sent.settings.Key());
  EXPECT_EQ(got.settings.dtype, sent.settings.dtype);
  ExpectSameSpec(got.stage, sent.stage);
}

TEST(ProtocolTest, AQueryCarriesItsStageProtocolAndWeightWarmth) {
  StageQuery sent = SampleQuery();
  EXPECT_EQ(RoundTrip(sent).settings.protocol, StageProtocol::kIsolated);
  for (const bool warm : {false, true}) {
    sent.settings.protocol = StageProtocol::kExecuted;
    sent.settings.warm_weights = warm;
    const StageQuery got = RoundTrip(sent);
    EXPECT_EQ(got.settings.protocol, StageProtocol::kExecuted);
    EXPECT_EQ(got.settings.warm_weights, warm);
    EXPECT_EQ(got.settings.Key(), sent.settings.Key());
  }
}

// Protocol 5 workers would ignore the protocol and measure isolated under
// an executed key: they speak another version and are refused.
TEST(ProtocolTest, AWorkerOfTheVersionBeforeStageProtocolsIsRefused) {
  EXPECT_GE(kProtocolVersion, 6u);
  const DecodeError error = Failure(EncodeWithVersion(SampleHello(), 5));
  EXPECT_EQ(error.kind, Kind::kVersionMismatch);
  EXPECT_EQ(error.version, 5u);
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

// Every activation of common/activation.h has its enumerant (kActivations in
// protocol.cc), after a convolution and on its own.
TEST(ProtocolTest, EveryActivationRoundTripsAsAPostOpAndAsAnOperator) {
  for (const ActivationKind& kind : ActivationKinds()) {
    SCOPED_TRACE(std::string(kind.name));
    StageQuery query = SampleQuery();
    query.stage.strategy = Strategy::kParallel;
    query.stage.externals = {{8, 5, 5}};
    query.stage.groups = {{{ConvOp(8, 3, 1, 1, kind.id), {{External(0, 0, 8)}}, {8, 5, 5}}},
                          {{ActivationOp(kind.id), {{External(0, 0, 8)}}, {8, 5, 5}}}};
    const StageQuery got = RoundTrip(query);
    ExpectSameSpec(got.stage, query.stage);
    ASSERT_EQ(got.stage.groups.size(), 2u);
    EXPECT_EQ(got.stage.groups[0][0].op.conv.act, kind.id);
    EXPECT_EQ(got.stage.groups[1][0].op.act, kind.id);
  }
}

TEST(ProtocolTest, RegisteredKindsRoundTripByNameWithTheirAttributes) {
  StageQuery query = SampleQuery();
  OpParams softmax = MakeRegisteredOp(RegisteredKind::kSoftmax);
  softmax.registered.attributes = {1};
  query.stage.strategy = Strategy::kParallel;
  query.stage.externals = {{10, 1, 1}};
  query.stage.groups = {{{softmax, {{External(0, 0, 10)}}, {10, 1, 1}}},
                        {{ios::testing::SequentialOp({ios::testing::ActOp(Activation::kRelu),
                                                      MakeRegisteredOp(RegisteredKind::kSoftmax)}),
                          {{External(0, 0, 10)}},
                          {10, 1, 1}}}};
  const StageQuery got = RoundTrip(query);
  ExpectSameSpec(got.stage, query.stage);
  EXPECT_EQ(got.stage.Key(), query.stage.Key());
  EXPECT_EQ(got.stage.groups[0][0].op, softmax);
}

TEST(ProtocolTest, AFloatAttributeRoundTripsBitExact) {
  StageQuery query = SampleQuery();
  OpParams layernorm = MakeRegisteredOp(RegisteredKind::kLayerNorm);
  SetFloatAttribute(layernorm.registered, "eps", 1e-6f, "test");
  query.stage.strategy = Strategy::kParallel;
  query.stage.externals = {{96, 4, 4}};
  query.stage.groups = {{{layernorm, {{External(0, 0, 96)}}, {96, 4, 4}}}};
  const StageQuery got = RoundTrip(query);
  ExpectSameSpec(got.stage, query.stage);
  EXPECT_EQ(got.stage.Key(), query.stage.Key());
  EXPECT_NE(got.stage.Key().find("layernorm(eps=1e-06)"), std::string::npos) << got.stage.Key();
  EXPECT_EQ(FloatAttributeOf(got.stage.groups[0][0].op.registered, "eps"), 1e-6f);
}

TEST(ProtocolTest, LeakyReluAndHardSigmoidCoefficientsRoundTripBitExact) {
  OpParams leaky = MakeRegisteredOp(RegisteredKind::kLeakyRelu);
  SetFloatAttribute(leaky.registered, "alpha", -0.2f, "test");
  OpParams hard = MakeRegisteredOp(RegisteredKind::kHardSigmoid);
  SetFloatAttribute(hard.registered, "alpha", 1.0f / 3, "test");
  SetFloatAttribute(hard.registered, "beta", 0.25f, "test");
  StageQuery query = SampleQuery();
  query.stage.strategy = Strategy::kParallel;
  query.stage.externals = {{8, 4, 4}};
  query.stage.groups = {{{leaky, {{External(0, 0, 8)}}, {8, 4, 4}}},
                        {{hard, {{External(0, 0, 8)}}, {8, 4, 4}}}};
  const StageQuery got = RoundTrip(query);
  ExpectSameSpec(got.stage, query.stage);
  EXPECT_EQ(got.stage.Key(), query.stage.Key());
  for (const char* text : {"leaky_relu(alpha=-0.2)", "hard_sigmoid(alpha=0.33333334,beta=0.25)"}) {
    EXPECT_NE(got.stage.Key().find(text), std::string::npos) << got.stage.Key();
  }
  EXPECT_EQ(got.stage.groups[0][0].op, leaky);
  EXPECT_EQ(got.stage.groups[1][0].op, hard);
}

TEST(ProtocolTest, PoolFlagsRoundTrip) {
  StageQuery query = SampleQuery();
  OpParams avg = PoolOp(PoolType::kAvg, 3, 2, 1);
  avg.pool.exclude_padding = true;
  OpParams max = PoolOp(PoolType::kMax, 3, 2, 0);
  max.pool.ceil = true;
  query.stage.strategy = Strategy::kParallel;
  query.stage.externals = {{4, 8, 8}};
  query.stage.groups = {{{avg, {{External(0, 0, 4)}}, {4, 4, 4}}},
                        {{max, {{External(0, 0, 4)}}, {4, 4, 4}}}};
  const StageQuery got = RoundTrip(query);
  EXPECT_EQ(got.stage.groups[0][0].op, avg);
  EXPECT_EQ(got.stage.groups[1][0].op, max);
}

TEST(ProtocolTest, ConvExtraEndPaddingRoundTrips) {
  StageQuery query = SampleQuery();
  OpParams both = ConvOp(4, 5, 2, 1);
  both.conv.padding_end_extra = {1, 1};
  OpParams height = ConvOp(4, 3, 2, 0);
  height.conv.padding_end_extra = {1, 0};
  query.stage.strategy = Strategy::kParallel;
  query.stage.externals = {{4, 8, 8}};
  query.stage.groups = {{{both, {{External(0, 0, 4)}}, {4, 4, 4}}},
                        {{height, {{External(0, 0, 4)}}, {4, 4, 3}}}};
  const StageQuery got = RoundTrip(query);
  EXPECT_EQ(got.stage.groups[0][0].op, both);
  EXPECT_EQ(got.stage.groups[1][0].op, height);
}

TEST(ProtocolTest, OkResultRoundTripsExactly) {
  const StageResult sent = SampleResult();
  const StageResult got = RoundTrip(sent);
  EXPECT_EQ(got.query_id, sent.query_id);
  EXPECT_TRUE(got.result.ok());
  EXPECT_EQ(got.result.median_ms, sent.result.median_ms);  // bit-exact doubles
  EXPECT_EQ(got.result.spread_ms, sent.result.spread_ms);
  EXPECT_EQ(got.result.samples, sent.result.samples);
  EXPECT_EQ(got.result.detail, "");
}

TEST(ProtocolTest, AResultCarriesWhatTheBackendChoseToRunIt) {
  StageResult sent = SampleResult();
  sent.result.detail = "cudnn conv algo 1/fma,6/tensor_op";
  EXPECT_EQ(RoundTrip(sent).result.detail, sent.result.detail);
  sent.result.detail = std::string(100000, 'd');  // cut like any text for people
  EXPECT_EQ(RoundTrip(sent).result.detail, std::string(4096, 'd'));
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
  for (uint32_t version : {1u, kProtocolVersion + 1, 0xffffffffu}) {
    const DecodeError error = Failure(EncodeWithVersion(SampleQuery(), version));
    EXPECT_EQ(error.kind, Kind::kVersionMismatch);
    EXPECT_EQ(error.version, version);
  }
  // The version is checked before the body: an invalid body still reports it.
  Heartbeat invalid{0};
  const DecodeError error = Failure(EncodeWithVersion(invalid, kProtocolVersion + 1));
  EXPECT_EQ(error.kind, Kind::kVersionMismatch);
  EXPECT_EQ(error.version, kProtocolVersion + 1);
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

}  // namespace
}  // namespace ios::schema
