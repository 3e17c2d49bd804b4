// Well-formed messages with invalid content are refused, naming the field.
#include <cmath>

#include "common/op_kinds.h"
#include "tests/schema/protocol_testing.h"

namespace ios::schema {
namespace {

using namespace protocol_testing;

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
    {"concatenation wider than a worker can read",
     [](StageQuery& q) {
       q.stage.externals[0].c = 65536;
       q.stage.groups[0][0].inputs = {{External(0, 0, 65536)}, {External(0, 0, 65536)}};
     },
     "query.stage.groups[0].ops[0].inputs: channel count 131072 exceeds the limit of 65536"},
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
    {"negative extra end padding",
     [](StageQuery& q) { q.stage.groups[0][0].op.conv.padding_end_extra.w = -1; },
     "query.stage.groups[0].ops[0].op.conv.padEndW: -1 out of range"},
    {"huge extra end padding",
     [](StageQuery& q) { q.stage.groups[0][0].op.conv.padding_end_extra.h = 1 << 20; },
     "query.stage.groups[0].ops[0].op.conv.padEndH: 1048576 out of range"},
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
    {"negative max repeat", [](StageQuery& q) { q.settings.max_repeat = -1; },
     "query.maxRepeat: -1 out of range"},
    {"spread over 100%", [](StageQuery& q) { q.settings.max_relative_spread = 1.5; },
     "query.maxRelativeSpreadPercent: 150"},
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
  // 9x9 like `strided` (17 + 2 + 1 - 3 is odd), but it pads one more row and
  // column at the end: unequal extras never merge.
  StageOp end_extra = strided;
  end_extra.op.conv.padding_end_extra = {1, 1};
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
      {{{strided}, {end_extra}}, "query.stage.groups[1].ops[0].op.conv.padEndH: merged"},
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
      {[](wire::Op::Builder op) { op.setKind(static_cast<wire::OpKind>(8)); },
       "query.stage.groups[0].ops[0].op.kind: unknown value 8"},
      {[](wire::Op::Builder op) { op.getConv().setActivation(static_cast<wire::Activation>(11)); },
       "query.stage.groups[0].ops[0].op.conv.activation: unknown value 11"},
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
  const DecodeError protocol = Failure(Build([](wire::Envelope::Builder envelope) {
    auto query = envelope.initQuery();
    OneConvStage(query.initStage());
    query.setProtocol(static_cast<wire::StageProtocol>(2));
  }));
  EXPECT_EQ(protocol.message, "query.protocol: unknown value 2");
  const DecodeError reason = Failure(Build([](wire::Envelope::Builder envelope) {
    envelope.initReject().setReason(static_cast<wire::RejectReason>(3));
  }));
  EXPECT_EQ(reason.message, "reject.reason: unknown value 3");
  const DecodeError kind = Failure(Build([](wire::Envelope::Builder envelope) {
    envelope.initResult().initError().setKind(static_cast<wire::ErrorKind>(4));
  }));
  EXPECT_EQ(kind.message, "result.error.kind: unknown value 4");
}

// A registered kind travels by name: a kind this build does not know, a
// wrong number of attributes or one out of range is refused, naming it.
TEST(ProtocolTest, RegisteredKindsAreCheckedByNameCountAndRange) {
  const auto softmax = [](const char* name, std::vector<int> values) {
    return [name, values](wire::Op::Builder op) {
      op.setKind(wire::OpKind::REGISTERED);
      if (name == nullptr) return;
      auto registered = op.initRegistered();
      registered.setName(name);
      auto attributes = registered.initAttributes(static_cast<unsigned>(values.size()));
      for (unsigned i = 0; i < values.size(); ++i) attributes.set(i, values[i]);
    };
  };
  ASSERT_TRUE(std::holds_alternative<Message>(Decode(OneConvQuery(softmax("softmax", {1})))));
  const struct {
    std::function<void(wire::Op::Builder)> edit;
    const char* expected;
  } cases[] = {
      {softmax(nullptr, {}), "query.stage.groups[0].ops[0].op.registered: missing"},
      {softmax("gelu", {}),
       "query.stage.groups[0].ops[0].op.registered.name: unknown operator kind 'gelu' (this "
       "build knows softmax, channel_shuffle, layernorm, leaky_relu, hard_sigmoid, flatten, "
       "attention, embed_tokens, window_attention, space_to_depth)"},
      {softmax("evil\n\x1b[2J", {}),
       "query.stage.groups[0].ops[0].op.registered.name: unknown operator kind "
       "'evil\\n\\x1b[2J' (this build knows softmax, channel_shuffle, layernorm, leaky_relu, "
       "hard_sigmoid, flatten, attention, embed_tokens, window_attention, space_to_depth)"},
      {softmax("softmax", {}),
       "query.stage.groups[0].ops[0].op.registered.attributes: softmax has 1, got 0"},
      {softmax("softmax", {2}),
       "query.stage.groups[0].ops[0].op.registered: log: 2 is out of range (expected 0 to 1; 1: "
       "the logarithm of the softmax (ONNX LogSoftmax))"},
      // A float attribute travels as its bits and is checked as a float.
      {softmax("layernorm", {FloatBits(0.0f)}),
       "query.stage.groups[0].ops[0].op.registered: eps: 0 is out of range (expected above 0 to "
       "1; added to the variance before its square root (PyTorch's default 1e-05))"},
      {softmax("layernorm", {FloatBits(std::nanf(""))}),
       "query.stage.groups[0].ops[0].op.registered: eps: nan is out of range (expected above 0 "
       "to 1; added to the variance before its square root (PyTorch's default 1e-05))"},
      {softmax("hard_sigmoid", {FloatBits(0.2f)}),
       "query.stage.groups[0].ops[0].op.registered.attributes: hard_sigmoid has 2, got 1"},
      {softmax("hard_sigmoid", {FloatBits(0.2f), FloatBits(-INFINITY)}),
       "query.stage.groups[0].ops[0].op.registered: beta: -inf is out of range (expected -1e+06 "
       "to 1e+06; the offset of alpha * x + beta before its clip to [0, 1] (ONNX's default "
       "0.5))"},
  };
  for (const auto& c : cases) {
    const DecodeError error = Failure(OneConvQuery(c.edit));
    EXPECT_EQ(error.kind, Kind::kInvalid);
    EXPECT_EQ(error.message, c.expected);
  }
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

// A refused query still names its id, so that a worker can answer it with
// an error instead of silence (issue 7 item 3); other messages name none.
TEST(ProtocolTest, RefusedQueryNamesItsIdWhenItCouldBeRead) {
  for (const InvalidCase& c : kInvalidQueries) {
    StageQuery query = SampleQuery();
    query.query_id = 0xfeedbeef12345678;
    c.edit(query);
    const DecodeError error = Failure(Encode(query));
    ASSERT_TRUE(error.query_id.has_value()) << c.name;
    EXPECT_EQ(*error.query_id, 0xfeedbeef12345678u) << c.name;
  }
  Hello hello = SampleHello();
  hello.capacity = 0;
  EXPECT_FALSE(Failure(Encode(hello)).query_id.has_value());
  EXPECT_FALSE(Failure(EncodeWithVersion(SampleQuery(), kProtocolVersion + 1)).query_id);
}

}  // namespace
}  // namespace ios::schema
