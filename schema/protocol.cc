// Converts between the protocol's C++ values (protocol.h) and Cap'n Proto
// flat messages (farm.capnp). Encoding writes every field as it is; decoding
// reads under strict limits, then validate.cc checks the values' meaning.
#include "schema/protocol.h"

#include <capnp/message.h>
#include <capnp/serialize.h>
#include <kj/exception.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <exception>
#include <string>
#include <type_traits>
#include <vector>

#include "common/op_kinds.h"
#include "common/printable.h"
#include "schema/farm.capnp.h"
#include "schema/link_wire.h"
#include "schema/network_wire.h"
#include "schema/validate.h"

namespace ios::schema {
namespace {

using detail::InvalidField;
using detail::ReadHello;
using detail::WriteHello;

// ---------------------------------------------------------------------------
// Enums: explicit pairs rather than casts, so the C++ enums may be reordered
// freely while wire ordinals never change.

template <typename Cpp, typename Wire, size_t N>
using EnumPairs = std::array<std::pair<Cpp, Wire>, N>;

constexpr EnumPairs<Strategy, wire::Strategy, 2> kStrategies{{
    {Strategy::kParallel, wire::Strategy::PARALLEL},
    {Strategy::kMerge, wire::Strategy::MERGE},
}};
constexpr EnumPairs<OpKind, wire::OpKind, 8> kOpKinds{{
    {OpKind::kInput, wire::OpKind::INPUT},
    {OpKind::kConv, wire::OpKind::CONV},
    {OpKind::kPool, wire::OpKind::POOL},
    {OpKind::kActivation, wire::OpKind::ACTIVATION},
    {OpKind::kEltwise, wire::OpKind::ELTWISE},
    {OpKind::kIdentity, wire::OpKind::IDENTITY},
    {OpKind::kSequential, wire::OpKind::SEQUENTIAL},
    {OpKind::kRegistered, wire::OpKind::REGISTERED},
}};
// One pair per kind of common/activation.h (checked by the protocol tests).
constexpr EnumPairs<Activation, wire::Activation, 11> kActivations{{
    {Activation::kNone, wire::Activation::NONE},
    {Activation::kRelu, wire::Activation::RELU},
    {Activation::kSigmoid, wire::Activation::SIGMOID},
    {Activation::kTanh, wire::Activation::TANH},
    {Activation::kRelu6, wire::Activation::RELU6},
    {Activation::kHardSwish, wire::Activation::HARDSWISH},
    {Activation::kSilu, wire::Activation::SILU},
    {Activation::kHardSigmoid, wire::Activation::HARDSIGMOID},
    {Activation::kLeakyRelu, wire::Activation::LEAKY_RELU},
    {Activation::kGelu, wire::Activation::GELU},
    {Activation::kGeluTanh, wire::Activation::GELU_TANH},
}};
constexpr EnumPairs<PoolType, wire::PoolType, 4> kPoolTypes{{
    {PoolType::kMax, wire::PoolType::MAX},
    {PoolType::kAvg, wire::PoolType::AVG},
    {PoolType::kGlobalMax, wire::PoolType::GLOBAL_MAX},
    {PoolType::kGlobalAvg, wire::PoolType::GLOBAL_AVG},
}};
constexpr EnumPairs<EltwiseType, wire::EltwiseType, 2> kEltwiseTypes{{
    {EltwiseType::kAdd, wire::EltwiseType::ADD},
    {EltwiseType::kMul, wire::EltwiseType::MUL},
}};
// MeasureError::kNone is not here: it is the `ok` branch of StageResult.
constexpr EnumPairs<MeasureError, wire::ErrorKind, 4> kErrorKinds{{
    {MeasureError::kOutOfMemory, wire::ErrorKind::OUT_OF_MEMORY},
    {MeasureError::kUnsupported, wire::ErrorKind::UNSUPPORTED},
    {MeasureError::kBackendFailure, wire::ErrorKind::BACKEND_FAILURE},
    {MeasureError::kTimeout, wire::ErrorKind::TIMEOUT},
}};
constexpr EnumPairs<StageProtocol, wire::StageProtocol, 2> kStageProtocols{{
    {StageProtocol::kIsolated, wire::StageProtocol::ISOLATED},
    {StageProtocol::kExecuted, wire::StageProtocol::EXECUTED},
}};
constexpr EnumPairs<RejectReason, wire::RejectReason, 3> kRejectReasons{{
    {RejectReason::kVersionMismatch, wire::RejectReason::VERSION_MISMATCH},
    {RejectReason::kMalformed, wire::RejectReason::MALFORMED},
    {RejectReason::kUnknownWorker, wire::RejectReason::UNKNOWN_WORKER},
}};

// Sent for a C++ value outside its enum (a cast gone wrong): no peer knows it
// either, so the receiver refuses the message instead of guessing.
constexpr uint16_t kUnknownEnumerant = 0xffff;

template <typename Cpp, typename Wire, size_t N>
Wire ToWire(const EnumPairs<Cpp, Wire, N>& pairs, Cpp value) {
  for (const auto& [cpp, on_wire] : pairs) {
    if (cpp == value) return on_wire;
  }
  return static_cast<Wire>(kUnknownEnumerant);
}

// A field path for error messages: a string literal, or a callable that
// builds the path only when it is needed (decoding runs it per op).
template <typename Where>
std::string PathText(const Where& where) {
  if constexpr (std::is_invocable_v<const Where&>) {
    return where();
  } else {
    return std::string(where);
  }
}

// Capnp hands back an unknown enumerant as its raw number.
template <typename Cpp, typename Wire, size_t N, typename Where>
Cpp FromWire(const EnumPairs<Cpp, Wire, N>& pairs, Wire value, const Where& where) {
  for (const auto& [cpp, on_wire] : pairs) {
    if (on_wire == value) return cpp;
  }
  throw InvalidField(PathText(where) + ": unknown value " +
                     std::to_string(static_cast<uint16_t>(value)));
}

// ---------------------------------------------------------------------------
// Encoding.

// Free-form text for people (error messages, reasons) is cut to what the
// receiver accepts, so a long exception text still yields a decodable answer.
template <typename InitText>
void SetProse(const std::string& text, InitText init) {
  const size_t size = std::min(text.size(), detail::kMaxTextBytes);
  capnp::Text::Builder out = init(static_cast<unsigned>(size));
  std::memcpy(out.begin(), text.data(), size);
}

capnp::Text::Reader TextOf(const std::string& text) { return {text.c_str(), text.size()}; }

void WriteShape(wire::Shape::Builder out, const Shape& shape) {
  out.setC(shape.c);
  out.setH(shape.h);
  out.setW(shape.w);
}

void WriteOp(wire::Op::Builder out, const OpParams& op) {
  out.setKind(ToWire(kOpKinds, op.kind));
  wire::Conv::Builder conv = out.initConv();
  conv.setOutChannels(op.conv.out_channels);
  conv.setKernelH(op.conv.kernel.h);
  conv.setKernelW(op.conv.kernel.w);
  conv.setStrideH(op.conv.stride.h);
  conv.setStrideW(op.conv.stride.w);
  conv.setPadH(op.conv.padding.h);
  conv.setPadW(op.conv.padding.w);
  conv.setPadEndH(op.conv.padding_end_extra.h);
  conv.setPadEndW(op.conv.padding_end_extra.w);
  conv.setDilationH(op.conv.dilation.h);
  conv.setDilationW(op.conv.dilation.w);
  conv.setGroups(op.conv.groups);
  conv.setBias(op.conv.bias);
  conv.setActivation(ToWire(kActivations, op.conv.act));
  wire::Pool::Builder pool = out.initPool();
  pool.setType(ToWire(kPoolTypes, op.pool.type));
  pool.setKernelH(op.pool.kernel.h);
  pool.setKernelW(op.pool.kernel.w);
  pool.setStrideH(op.pool.stride.h);
  pool.setStrideW(op.pool.stride.w);
  pool.setPadH(op.pool.padding.h);
  pool.setPadW(op.pool.padding.w);
  pool.setCeil(op.pool.ceil);
  pool.setExcludePadding(op.pool.exclude_padding);
  out.setActivation(ToWire(kActivations, op.act));
  out.setEltwise(ToWire(kEltwiseTypes, op.eltwise));
  if (op.kind == OpKind::kRegistered) {
    // Other kinds leave the pointer null.
    wire::RegisteredOp::Builder registered = out.initRegistered();
    registered.setName(TextOf(std::string(SpecOf(op.registered.kind).name)));
    const std::vector<int>& values = op.registered.attributes;
    auto attributes = registered.initAttributes(static_cast<unsigned>(values.size()));
    for (unsigned i = 0; i < attributes.size(); ++i) attributes.set(i, values[i]);
  }
  if (op.chain.empty()) return;
  auto chain = out.initChain(static_cast<unsigned>(op.chain.size()));
  for (unsigned k = 0; k < chain.size(); ++k) WriteOp(chain[k], op.chain[k]);
}

void WriteStage(wire::Stage::Builder out, const StageSpec& spec) {
  out.setStrategy(ToWire(kStrategies, spec.strategy));
  auto externals = out.initExternals(static_cast<unsigned>(spec.externals.size()));
  for (unsigned e = 0; e < externals.size(); ++e) WriteShape(externals[e], spec.externals[e]);
  auto groups = out.initGroups(static_cast<unsigned>(spec.groups.size()));
  for (unsigned g = 0; g < groups.size(); ++g) {
    const std::vector<StageOp>& group = spec.groups[g];
    auto ops = groups[g].initOps(static_cast<unsigned>(group.size()));
    for (unsigned i = 0; i < ops.size(); ++i) {
      const StageOp& op = group[i];
      WriteOp(ops[i].initOp(), op.op);
      auto inputs = ops[i].initInputs(static_cast<unsigned>(op.inputs.size()));
      for (unsigned t = 0; t < inputs.size(); ++t) {
        auto slices = inputs[t].initSlices(static_cast<unsigned>(op.inputs[t].size()));
        for (unsigned s = 0; s < slices.size(); ++s) {
          const SliceRef& ref = op.inputs[t][s];
          slices[s].setExternal(ref.external);
          slices[s].setIndex(ref.index);
          slices[s].setBegin(ref.begin);
          slices[s].setEnd(ref.end);
        }
      }
      WriteShape(ops[i].initOutput(), op.output);
    }
  }
}

// Exactly one of `stage`, `network` and `link` is given.
void WriteQuery(wire::StageQuery::Builder out, uint64_t query_id, const StageSpec* stage,
                const NetworkSpec* network, int batch_size, const MeasureSettings& settings,
                uint32_t timeout_ms, const LinkQuery* link = nullptr) {
  out.setQueryId(query_id);
  out.setBatchSize(batch_size);
  out.setDtype(TextOf(settings.dtype));
  out.setWarmup(settings.warmup);
  out.setNumber(settings.number);
  out.setRepeat(settings.repeat);
  out.setMaxRepeat(settings.max_repeat);
  out.setMaxRelativeSpreadPercent(settings.max_relative_spread * 100);
  out.setTimeoutMs(timeout_ms);
  out.setProtocol(ToWire(kStageProtocols, settings.protocol));
  out.setWarmWeights(settings.warm_weights);
  if (network != nullptr) return detail::WriteNetwork(out.initNetwork(), *network);
  if (link != nullptr) return detail::WriteLinkQuery(out.initLink(), *link);
  WriteStage(out.initStage(), *stage);
}

void WriteResult(wire::StageResult::Builder out, const StageResult& result) {
  out.setQueryId(result.query_id);
  const MeasureResult& r = result.result;
  if (r.ok()) {
    auto ok = out.initOk();
    ok.setMedianMs(r.median_ms);
    ok.setSpreadMs(r.spread_ms);
    ok.setSamples(r.samples);
    // Absent rather than empty: frames without a detail stay byte for byte
    // what older workers send.
    if (!r.detail.empty()) SetProse(r.detail, [&](unsigned size) { return ok.initDetail(size); });
    if (result.link) detail::WriteLinkResult(ok.initLink(), *result.link);
  } else {
    auto error = out.initError();
    error.setKind(ToWire(kErrorKinds, r.error));
    SetProse(r.error_message, [&](unsigned size) { return error.initMessage(size); });
  }
}

std::string ToBytes(capnp::MessageBuilder& builder) {
  const kj::Array<capnp::word> words = capnp::messageToFlatArray(builder);
  const kj::ArrayPtr<const kj::byte> bytes = words.asBytes();
  return std::string(reinterpret_cast<const char*>(bytes.begin()), bytes.size());
}

// ---------------------------------------------------------------------------
// Decoding: a mirror of the encoder that enforces the structural budgets
// (list lengths, chain depth, known enumerants) before it allocates. Each
// pointer is read once, since every read counts against the traversal limit.

std::string ReadText(capnp::Text::Reader text) { return std::string(text.cStr(), text.size()); }

Shape ReadShape(wire::Shape::Reader in) { return {in.getC(), in.getH(), in.getW()}; }

template <typename Where>
void CheckCount(size_t count, size_t max, const Where& where) {
  if (count > max) {
    throw InvalidField(PathText(where) + ": " + std::to_string(count) + " entries, at most " +
                       std::to_string(max));
  }
}

// Where an op sits, turned into text only for an error message.
struct OpPath {
  size_t group = 0, op = 0;
  std::vector<size_t> chain;  // indices into nested chains, outermost first

  std::string Text(const char* field) const {
    std::string text =
        "query.stage.groups[" + std::to_string(group) + "].ops[" + std::to_string(op) + "].op";
    for (size_t k : chain) text += ".chain[" + std::to_string(k) + "]";
    return text + "." + field;
  }
};

// The kind by name, the attributes by count; validate.cc checks their ranges.
void ReadRegistered(wire::Op::Reader in, OpParams& out, const OpPath& path) {
  if (!in.hasRegistered()) throw InvalidField(path.Text("registered") + ": missing");
  const wire::RegisteredOp::Reader registered = in.getRegistered();
  const capnp::Text::Reader name = registered.getName();
  const OpKindSpec* spec = name.size() <= detail::kMaxTextBytes
                               ? RegisteredKindNamed(std::string_view(name.cStr(), name.size()))
                               : nullptr;
  if (spec == nullptr) {
    // A peer's text, escaped and cut short for the log line.
    throw InvalidField(path.Text("registered.name") + ": unknown operator kind " +
                       Quoted(ReadText(name).substr(0, 64)) + " (this build knows " +
                       RegisteredKindNames() + ")");
  }
  const auto attributes = registered.getAttributes();
  if (attributes.size() != spec->attributes.size()) {
    throw InvalidField(path.Text("registered.attributes") + ": " + std::string(spec->name) +
                       " has " + std::to_string(spec->attributes.size()) + ", got " +
                       std::to_string(attributes.size()));
  }
  out.registered.kind = spec->kind;
  out.registered.attributes.clear();
  for (const int value : attributes) out.registered.attributes.push_back(value);
}

void ReadOp(wire::Op::Reader in, OpParams& out, OpPath& path) {
  const auto where = [&path](const char* field) {
    return [&path, field] { return path.Text(field); };
  };
  out.kind = FromWire(kOpKinds, in.getKind(), where("kind"));
  const wire::Conv::Reader conv = in.getConv();
  out.conv.out_channels = conv.getOutChannels();
  out.conv.kernel = {conv.getKernelH(), conv.getKernelW()};
  out.conv.stride = {conv.getStrideH(), conv.getStrideW()};
  out.conv.padding = {conv.getPadH(), conv.getPadW()};
  out.conv.padding_end_extra = {conv.getPadEndH(), conv.getPadEndW()};
  out.conv.dilation = {conv.getDilationH(), conv.getDilationW()};
  out.conv.groups = conv.getGroups();
  out.conv.bias = conv.getBias();
  out.conv.act = FromWire(kActivations, conv.getActivation(), where("conv.activation"));
  const wire::Pool::Reader pool = in.getPool();
  out.pool.type = FromWire(kPoolTypes, pool.getType(), where("pool.type"));
  out.pool.kernel = {pool.getKernelH(), pool.getKernelW()};
  out.pool.stride = {pool.getStrideH(), pool.getStrideW()};
  out.pool.padding = {pool.getPadH(), pool.getPadW()};
  out.pool.ceil = pool.getCeil();
  out.pool.exclude_padding = pool.getExcludePadding();
  out.act = FromWire(kActivations, in.getActivation(), where("activation"));
  out.eltwise = FromWire(kEltwiseTypes, in.getEltwise(), where("eltwise"));
  if (out.kind == OpKind::kRegistered) ReadRegistered(in, out, path);
  if (!in.hasChain()) return;
  // Checked before descending, so the recursion depth is ours to bound, well
  // inside capnp's nesting limit.
  if (path.chain.size() >= detail::kMaxChainDepth) {
    throw InvalidField(path.Text("chain") + ": nested deeper than " +
                       std::to_string(detail::kMaxChainDepth) + " levels");
  }
  const auto chain = in.getChain();
  CheckCount(chain.size(), detail::kMaxChainLength, where("chain"));
  out.chain.resize(chain.size());
  for (unsigned k = 0; k < chain.size(); ++k) {
    path.chain.push_back(k);
    ReadOp(chain[k], out.chain[k], path);
    path.chain.pop_back();
  }
}

void ReadStageOp(wire::StageOp::Reader in, StageOp& out, OpPath& path) {
  ReadOp(in.getOp(), out.op, path);
  const auto inputs = in.getInputs();
  const auto op_where = [&path] {
    return "query.stage.groups[" + std::to_string(path.group) + "].ops[" + std::to_string(path.op) +
           "].inputs";
  };
  CheckCount(inputs.size(), detail::kMaxTerms, op_where);
  out.inputs.resize(inputs.size());
  for (unsigned t = 0; t < inputs.size(); ++t) {
    const auto slices = inputs[t].getSlices();
    CheckCount(slices.size(), detail::kMaxSlices,
               [&] { return op_where() + "[" + std::to_string(t) + "]"; });
    std::vector<SliceRef>& term = out.inputs[t];
    term.reserve(slices.size());
    for (const wire::SliceRef::Reader slice : slices) {
      term.push_back({slice.getExternal(), slice.getIndex(), slice.getBegin(), slice.getEnd()});
    }
  }
  out.output = ReadShape(in.getOutput());
}

void ReadStage(wire::Stage::Reader in, StageSpec& out) {
  out.strategy = FromWire(kStrategies, in.getStrategy(), "query.stage.strategy");
  const auto externals = in.getExternals();
  CheckCount(externals.size(), detail::kMaxExternals, "query.stage.externals");
  out.externals.reserve(externals.size());
  for (const wire::Shape::Reader shape : externals) out.externals.push_back(ReadShape(shape));
  const auto groups = in.getGroups();
  CheckCount(groups.size(), detail::kMaxGroups, "query.stage.groups");
  out.groups.resize(groups.size());
  OpPath path;
  for (unsigned g = 0; g < groups.size(); ++g) {
    const auto ops = groups[g].getOps();
    CheckCount(ops.size(), detail::kMaxOpsPerGroup,
               [g] { return "query.stage.groups[" + std::to_string(g) + "].ops"; });
    out.groups[g].resize(ops.size());
    for (unsigned i = 0; i < ops.size(); ++i) {
      path.group = g;
      path.op = i;
      ReadStageOp(ops[i], out.groups[g][i], path);
    }
  }
}

StageQuery ReadQuery(wire::StageQuery::Reader in) {
  StageQuery query;
  query.query_id = in.getQueryId();
  query.batch_size = in.getBatchSize();
  query.settings.dtype = ReadText(in.getDtype());
  query.settings.warmup = in.getWarmup();
  query.settings.number = in.getNumber();
  query.settings.repeat = in.getRepeat();
  query.settings.max_repeat = in.getMaxRepeat();
  query.settings.max_relative_spread = in.getMaxRelativeSpreadPercent() / 100;
  query.timeout_ms = in.getTimeoutMs();
  query.settings.protocol = FromWire(kStageProtocols, in.getProtocol(), "query.protocol");
  query.settings.warm_weights = in.getWarmWeights();
  if (in.hasNetwork()) {
    query.network = detail::ReadNetwork(in);
  } else if (in.hasLink()) {
    query.link = detail::ReadLinkQuery(in);
  } else {
    ReadStage(in.getStage(), query.stage);
  }
  return query;
}

StageResult ReadResult(wire::StageResult::Reader in) {
  StageResult result;
  result.query_id = in.getQueryId();
  MeasureResult& r = result.result;
  switch (in.which()) {
    case wire::StageResult::OK: {
      const auto ok = in.getOk();
      r.median_ms = ok.getMedianMs();
      r.spread_ms = ok.getSpreadMs();
      r.samples = ok.getSamples();
      r.detail = ReadText(ok.getDetail());
      if (ok.hasLink()) result.link = detail::ReadLinkResult(ok.getLink());
      return result;
    }
    case wire::StageResult::ERROR: {
      const auto error = in.getError();
      r.error = FromWire(kErrorKinds, error.getKind(), "result.error.kind");
      r.error_message = ReadText(error.getMessage());
      return result;
    }
  }
  throw InvalidField("result: unknown branch " + std::to_string(static_cast<uint16_t>(in.which())));
}

Message ReadBody(wire::Envelope::Reader in) {
  switch (in.which()) {
    case wire::Envelope::HELLO:
      return ReadHello(in.getHello());
    case wire::Envelope::HEARTBEAT:
      return Heartbeat{in.getHeartbeat().getIntervalMs()};
    case wire::Envelope::QUERY:
      return ReadQuery(in.getQuery());
    case wire::Envelope::RESULT:
      return ReadResult(in.getResult());
    case wire::Envelope::REJECT: {
      const auto reject = in.getReject();
      return Reject{FromWire(kRejectReasons, reject.getReason(), "reject.reason"),
                    ReadText(reject.getMessage())};
    }
    case wire::Envelope::SHUTDOWN:
      return Shutdown{ReadText(in.getShutdown().getReason())};
  }
  throw InvalidField("envelope: unknown message kind " +
                     std::to_string(static_cast<uint16_t>(in.which())));
}

DecodeError Failure(DecodeError::Kind kind, std::string message,
                    std::optional<uint64_t> query_id = std::nullopt) {
  return DecodeError{kind, std::move(message), 0, query_id};
}

}  // namespace

std::string EncodeWithVersion(const Message& message, uint32_t version) {
  capnp::MallocMessageBuilder builder;
  wire::Envelope::Builder envelope = builder.initRoot<wire::Envelope>();
  envelope.setVersion(version);
  struct Writer {
    wire::Envelope::Builder& out;
    void operator()(const Hello& m) { WriteHello(out.initHello(), m); }
    void operator()(const Heartbeat& m) { out.initHeartbeat().setIntervalMs(m.interval_ms); }
    void operator()(const StageQuery& m) {
      WriteQuery(out.initQuery(), m.query_id, &m.stage, m.network.get(), m.batch_size, m.settings,
                 m.timeout_ms, m.link ? &*m.link : nullptr);
    }
    void operator()(const StageResult& m) { WriteResult(out.initResult(), m); }
    void operator()(const Reject& m) {
      auto reject = out.initReject();
      reject.setReason(ToWire(kRejectReasons, m.reason));
      SetProse(m.message, [&](unsigned size) { return reject.initMessage(size); });
    }
    void operator()(const Shutdown& m) {
      auto shutdown = out.initShutdown();
      SetProse(m.reason, [&](unsigned size) { return shutdown.initReason(size); });
    }
  };
  std::visit(Writer{envelope}, message);
  return ToBytes(builder);
}

std::string Encode(const Message& message) { return EncodeWithVersion(message, kProtocolVersion); }

std::string EncodeQuery(uint64_t query_id, const StageSpec& stage, int batch_size,
                        const MeasureSettings& settings, uint32_t timeout_ms) {
  capnp::MallocMessageBuilder builder;
  wire::Envelope::Builder envelope = builder.initRoot<wire::Envelope>();
  envelope.setVersion(kProtocolVersion);
  WriteQuery(envelope.initQuery(), query_id, &stage, nullptr, batch_size, settings, timeout_ms);
  return ToBytes(builder);
}

std::string EncodeNetworkQuery(uint64_t query_id, const NetworkSpec& network, int batch_size,
                               const MeasureSettings& settings, uint32_t timeout_ms) {
  capnp::MallocMessageBuilder builder;
  wire::Envelope::Builder envelope = builder.initRoot<wire::Envelope>();
  envelope.setVersion(kProtocolVersion);
  WriteQuery(envelope.initQuery(), query_id, nullptr, &network, batch_size, settings, timeout_ms);
  return ToBytes(builder);
}

std::string EncodeLinkQuery(uint64_t query_id, const LinkQuery& link, uint32_t timeout_ms) {
  capnp::MallocMessageBuilder builder;
  wire::Envelope::Builder envelope = builder.initRoot<wire::Envelope>();
  envelope.setVersion(kProtocolVersion);
  WriteQuery(envelope.initQuery(), query_id, nullptr, nullptr, 1, MeasureSettings{}, timeout_ms,
             &link);
  return ToBytes(builder);
}

std::variant<Message, DecodeError> Decode(std::string_view bytes) {
  using Kind = DecodeError::Kind;
  if (bytes.size() > kMaxMessageBytes) {
    return Failure(Kind::kOversized, std::to_string(bytes.size()) + " bytes, at most " +
                                         std::to_string(kMaxMessageBytes));
  }
  if (bytes.empty() || bytes.size() % sizeof(capnp::word) != 0) {
    return Failure(Kind::kMalformed,
                   std::to_string(bytes.size()) + " bytes: not a whole number of 8-byte words");
  }
  std::optional<uint64_t> query_id;  // read first, so that a refusal can name it
  try {
    // ZeroMQ frames carry no alignment guarantee; capnp reads words in place.
    kj::Array<capnp::word> words = kj::heapArray<capnp::word>(bytes.size() / sizeof(capnp::word));
    std::memcpy(words.begin(), bytes.data(), bytes.size());
    capnp::ReaderOptions options;
    // A valid message reads each word about once; the slack refuses frames
    // whose pointers make the reader visit the same bytes over and over.
    options.traversalLimitInWords = 4 * words.size() + 64;
    options.nestingLimit = 32;
    capnp::FlatArrayMessageReader reader(words, options);
    if (reader.getEnd() != words.end()) {
      return Failure(Kind::kMalformed, "bytes after the end of the message");
    }
    const wire::Envelope::Reader envelope = reader.getRoot<wire::Envelope>();
    const uint32_t version = envelope.getVersion();
    // 0 is capnp's default: the field is unset (e.g. a null root), which is
    // garbage rather than a peer of another version. Versions start at 1.
    if (version == 0) return Failure(Kind::kMalformed, "no protocol version (field 0 unset)");
    if (version != kProtocolVersion) {
      return DecodeError{Kind::kVersionMismatch,
                         "protocol version " + std::to_string(version) + ", expected " +
                             std::to_string(kProtocolVersion),
                         version, std::nullopt};
    }
    if (envelope.which() == wire::Envelope::QUERY) query_id = envelope.getQuery().getQueryId();
    Message message = ReadBody(envelope);
    detail::Validate(message);
    return message;
  } catch (const InvalidField& e) {
    return Failure(Kind::kInvalid, e.what(), query_id);
  } catch (const kj::Exception& e) {
    return Failure(Kind::kMalformed, e.getDescription().cStr(), query_id);
  } catch (const std::exception& e) {
    return Failure(Kind::kMalformed, e.what(), query_id);
  } catch (...) {
    return Failure(Kind::kMalformed, "unreadable message", query_id);
  }
}

}  // namespace ios::schema
