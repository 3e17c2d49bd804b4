#include "schema/validate.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string_view>
#include <type_traits>

#include "common/error.h"
#include "common/op_kinds.h"
#include "common/slices.h"
#include "common/stage.h"

namespace ios::schema::detail {
namespace {

[[noreturn]] void Fail(const std::string& path, const std::string& what) {
  throw InvalidField(path + ": " + what);
}

std::string Indexed(const std::string& base, size_t index) {
  return base + "[" + std::to_string(index) + "]";
}

template <typename T>
void CheckRange(T value, T low, T high, const std::string& path) {
  if (value < low || value > high) {
    Fail(path, std::to_string(value) + " out of range [" + std::to_string(low) + ", " +
                   std::to_string(high) + "]");
  }
}

void CheckText(const std::string& text, const std::string& path, bool required = false) {
  if (text.size() > kMaxTextBytes) {
    Fail(path, std::to_string(text.size()) + " bytes, at most " + std::to_string(kMaxTextBytes));
  }
  if (required && text.empty()) Fail(path, "must not be empty");
}

void CheckShape(const Shape& shape, const std::string& path) {
  CheckRange(shape.c, 1, kMaxExtent, path + ".c");
  CheckRange(shape.h, 1, kMaxExtent, path + ".h");
  CheckRange(shape.w, 1, kMaxExtent, path + ".w");
}

// Bounds a sliding window so that shape inference cannot overflow `int`:
// the span dilation*(kernel-1)+1 is checked in 64 bits before InferOpOutput
// computes it in 32.
void CheckWindows(const Window& kernel, const Window& stride, const Window& padding,
                  const Window& dilation, const std::string& path) {
  CheckRange(kernel.h, 1, kMaxExtent, path + "kernelH");
  CheckRange(kernel.w, 1, kMaxExtent, path + "kernelW");
  CheckRange(stride.h, 1, kMaxExtent, path + "strideH");
  CheckRange(stride.w, 1, kMaxExtent, path + "strideW");
  CheckRange(padding.h, 0, kMaxExtent, path + "padH");
  CheckRange(padding.w, 0, kMaxExtent, path + "padW");
  CheckRange(dilation.h, 1, kMaxExtent, path + "dilationH");
  CheckRange(dilation.w, 1, kMaxExtent, path + "dilationW");
  const int64_t span_h = int64_t{dilation.h} * (kernel.h - 1) + 1;
  const int64_t span_w = int64_t{dilation.w} * (kernel.w - 1) + 1;
  if (span_h > kMaxExtent) {
    Fail(path + "kernelH", "dilated span " + std::to_string(span_h) + " too large");
  }
  if (span_w > kMaxExtent) {
    Fail(path + "kernelW", "dilated span " + std::to_string(span_w) + " too large");
  }
}

// Parameters of the op's own kind (the others are ignored by every user).
// `path` names the op, e.g. "query.stage.groups[0].ops[2].op".
void CheckParams(const OpParams& op, const std::string& path) {
  switch (op.kind) {
    case OpKind::kConv: {
      const ConvParams& c = op.conv;
      CheckRange(c.out_channels, 1, kMaxExtent, path + ".conv.outChannels");
      CheckRange(c.groups, 1, kMaxExtent, path + ".conv.groups");
      CheckWindows(c.kernel, c.stride, c.padding, c.dilation, path + ".conv.");
      CheckRange(c.padding_end_extra.h, 0, kMaxExtent, path + ".conv.padEndH");
      CheckRange(c.padding_end_extra.w, 0, kMaxExtent, path + ".conv.padEndW");
      break;
    }
    case OpKind::kPool:
      if (op.pool.type == PoolType::kMax || op.pool.type == PoolType::kAvg) {
        CheckWindows(op.pool.kernel, op.pool.stride, op.pool.padding, Window{}, path + ".pool.");
      }
      break;
    case OpKind::kSequential:
      if (op.chain.empty()) Fail(path + ".chain", "a sequential op needs at least one step");
      for (size_t k = 0; k < op.chain.size(); ++k) {
        CheckParams(op.chain[k], Indexed(path + ".chain", k));
      }
      return;
    case OpKind::kRegistered:
      try {
        CheckAttributes(op.registered, path + ".registered");
      } catch (const Error& e) {
        throw InvalidField(e.what());
      }
      break;
    case OpKind::kInput:
    case OpKind::kActivation:
    case OpKind::kEltwise:
    case OpKind::kIdentity:
      break;
  }
  // Only a sequential op has steps; a chain elsewhere would travel unchecked.
  if (!op.chain.empty()) {
    Fail(path + ".chain", std::string("a ") + ToString(op.kind) + " op has no steps");
  }
}

// Term shapes as every user resolves them (common/slices.h), with the
// error's field appended to the op's path.
std::vector<Shape> TermShapes(const StageSpec& spec, size_t group, size_t op,
                              const std::string& path) {
  try {
    return ResolveStageInput(spec, group, op).TermShapes();
  } catch (const InputError& e) {
    throw InvalidField(path + "." + e.what());
  }
}

// The merge rule of CanMerge (common/stage.h) on a spec: one op per group,
// every op reading the first one's input and free of merge conflicts with it
// (FindMergeConflict), so that MergedConv can build the stage. The output
// check is implied by the rule; it stays for a clearer message.
void CheckMergeable(const StageSpec& spec, const std::string& path) {
  if (spec.OperatorCount() < 2) {
    Fail(path + ".strategy", "merge needs two or more operators (one is a parallel stage)");
  }
  const StageOp& first = spec.groups[0][0];
  for (size_t g = 0; g < spec.groups.size(); ++g) {
    const std::string group_path = Indexed(path + ".groups", g);
    if (spec.groups[g].size() != 1) Fail(group_path + ".ops", "a merge stage has one op per group");
    const StageOp& op = spec.groups[g][0];
    const std::string op_path = group_path + ".ops[0]";
    if (!MergeSignatureOf(op.op)) {
      Fail(op_path + ".op", "a merge stage runs only convolutions with groups = 1");
    }
    if (g == 0) continue;
    if (op.inputs != first.inputs) {
      std::string where = op_path + ".inputs";  // terms differ in number: the whole list
      if (op.inputs.size() == first.inputs.size()) {
        size_t t = 0;
        while (op.inputs[t] == first.inputs[t]) ++t;
        where = Indexed(where, t);
        const size_t common = std::min(op.inputs[t].size(), first.inputs[t].size());
        size_t s = 0;
        while (s < common && op.inputs[t][s] == first.inputs[t][s]) ++s;
        if (s < common) where = Indexed(where, s);
      }
      Fail(where, "merged convolutions must all read the same slice");
    }
    if (op.output.h != first.output.h || op.output.w != first.output.w) {
      Fail(op_path + ".output", "merged convolutions must have equal output resolution");
    }
    if (const std::optional<MergeConflict> conflict = FindMergeConflict(first.op, op.op)) {
      Fail(op_path + ".op.conv." + conflict->field,
           "merged convolutions conflict with groups[0].ops[0]: " + conflict->reason);
    }
  }
  // CanMerge's set-level check: the merged conv is one operator.
  int64_t out_channels = 0;
  for (const std::vector<StageOp>& group : spec.groups)
    out_channels += group[0].op.conv.out_channels;
  if (out_channels > kMaxExtent) {
    Fail(path + ".groups", "the merged convolution would have " + std::to_string(out_channels) +
                               " output channels, more than " + std::to_string(kMaxExtent));
  }
}

void CheckStage(const StageSpec& spec, const std::string& path) {
  if (spec.groups.empty()) Fail(path + ".groups", "a stage needs at least one group");
  for (size_t e = 0; e < spec.externals.size(); ++e) {
    CheckShape(spec.externals[e], Indexed(path + ".externals", e));
  }
  for (size_t g = 0; g < spec.groups.size(); ++g) {
    const std::vector<StageOp>& group = spec.groups[g];
    const std::string group_path = Indexed(path + ".groups", g);
    if (group.empty()) Fail(group_path + ".ops", "a group needs at least one op");
    for (size_t i = 0; i < group.size(); ++i) {
      const StageOp& op = group[i];
      const std::string op_path = Indexed(group_path + ".ops", i);
      CheckParams(op.op, op_path + ".op");
      const std::vector<Shape> term_shapes = TermShapes(spec, g, i, op_path);
      CheckShape(op.output, op_path + ".output");
      Shape inferred;
      try {
        inferred = InferOpOutput(op.op, term_shapes, op_path);
      } catch (const ios::Error& e) {
        throw InvalidField(e.what());
      }
      if (!(inferred == op.output)) {
        Fail(op_path + ".output",
             "declared " + ShapeText(op.output) + " but the inputs give " + ShapeText(inferred));
      }
    }
  }
  if (spec.strategy == Strategy::kMerge) CheckMergeable(spec, path);
}

// A link's figures: a bandwidth > 0 and a latency >= 0, both finite.
void CheckLinkFigures(double gb_per_s, double latency_us, const std::string& path) {
  if (!(std::isfinite(gb_per_s) && gb_per_s > 0)) {
    Fail(path + ".gbPerS", std::to_string(gb_per_s) + " is not a finite bandwidth > 0");
  }
  if (!(std::isfinite(latency_us) && latency_us >= 0)) {
    Fail(path + ".latencyUs", std::to_string(latency_us) + " is not a finite latency >= 0");
  }
}

void CheckLinkQuery(const LinkQuery& link) {
  if (link.bytes.empty()) Fail("query.link.bytes", "empty; expected at least one size");
  for (size_t i = 0; i < link.bytes.size(); ++i) {
    CheckRange(link.bytes[i], int64_t{1}, kMaxLinkBytes, Indexed("query.link.bytes", i));
  }
  CheckRange(link.repeats, 1, kMaxLinkRepeats, "query.link.repeats");
}

void CheckLinkResult(const LinkMeasurement& link) {
  CheckText(link.kind, "result.ok.link.kind", /*required=*/true);
  CheckLinkFigures(link.gb_per_s, link.latency_us, "result.ok.link");
  for (size_t i = 0; i < link.samples.size(); ++i) {
    const LinkSample& s = link.samples[i];
    const std::string path = Indexed("result.ok.link.samples", i);
    CheckRange(s.bytes, int64_t{1}, kMaxLinkBytes, path + ".bytes");
    if (!(std::isfinite(s.median_ms) && s.median_ms >= 0)) {
      Fail(path + ".medianMs", std::to_string(s.median_ms) + " is not a finite time >= 0");
    }
    if (!(std::isfinite(s.spread_ms) && s.spread_ms >= 0)) {
      Fail(path + ".spreadMs", std::to_string(s.spread_ms) + " is not a finite time >= 0");
    }
  }
}

void Check(const Hello& hello) {
  CheckText(hello.worker_id, "hello.workerId");
  CheckText(hello.device.backend, "hello.backend");
  CheckText(hello.device.name, "hello.deviceName");
  // The coordinator routes queries by fingerprint: without one it cannot.
  CheckText(hello.device.fingerprint, "hello.fingerprint", /*required=*/true);
  for (size_t i = 0; i < hello.properties.size(); ++i) {
    CheckText(hello.properties[i].first, Indexed("hello.properties", i) + ".key");
    CheckText(hello.properties[i].second, Indexed("hello.properties", i) + ".value");
  }
  CheckRange(hello.capacity, uint32_t{1}, kMaxCapacity, "hello.capacity");
  CheckRange(hello.heartbeat_ms, kMinHeartbeatMs, kMaxHeartbeatMs, "hello.heartbeatMs");
  CheckText(hello.software, "hello.software");
  CheckRange(hello.devices, uint32_t{1}, kMaxDevices, "hello.devices");
  for (size_t i = 0; i < hello.links.size(); ++i) {
    const LinkFigures& link = hello.links[i];
    const std::string path = Indexed("hello.links", i);
    CheckText(link.kind, path + ".kind", /*required=*/true);
    CheckLinkFigures(link.gb_per_s, link.latency_us, path);
  }
}

void Check(const Heartbeat& heartbeat) {
  CheckRange(heartbeat.interval_ms, kMinHeartbeatMs, kMaxHeartbeatMs, "heartbeat.intervalMs");
}

void Check(const StageQuery& query) {
  CheckRange(query.batch_size, 1, kMaxBatchSize, "query.batchSize");
  CheckText(query.settings.dtype, "query.dtype", /*required=*/true);
  CheckRange(query.settings.warmup, 0, kMaxRuns, "query.warmup");
  CheckRange(query.settings.number, 1, kMaxRuns, "query.number");
  CheckRange(query.settings.repeat, 1, kMaxRuns, "query.repeat");
  CheckRange(query.settings.max_repeat, 0, kMaxRuns, "query.maxRepeat");
  if (!(query.settings.max_relative_spread >= 0 && query.settings.max_relative_spread <= 1)) {
    throw InvalidField("query.maxRelativeSpreadPercent: " +
                       std::to_string(query.settings.max_relative_spread * 100) +
                       " out of range [0, 100]");
  }
  // A network was checked as it was read (network_wire.cc).
  if (query.link) {
    CheckLinkQuery(*query.link);
  } else if (query.network == nullptr) {
    CheckStage(query.stage, "query.stage");
  }
}

void Check(const StageResult& result) {
  const MeasureResult& r = result.result;
  if (r.ok()) {
    if (!std::isfinite(r.median_ms) || r.median_ms < 0) {
      Fail("result.ok.medianMs", std::to_string(r.median_ms) + " is not a finite time >= 0");
    }
    if (!std::isfinite(r.spread_ms) || r.spread_ms < 0) {
      Fail("result.ok.spreadMs", std::to_string(r.spread_ms) + " is not a finite time >= 0");
    }
    if (r.samples < 0) Fail("result.ok.samples", std::to_string(r.samples) + " is negative");
    CheckText(r.detail, "result.ok.detail");
    if (result.link) CheckLinkResult(*result.link);
  } else {
    CheckText(r.error_message, "result.error.message");
  }
}

void Check(const Reject& reject) { CheckText(reject.message, "reject.message"); }

void Check(const Shutdown& shutdown) { CheckText(shutdown.reason, "shutdown.reason"); }

}  // namespace

void Validate(const Message& message) {
  std::visit([](const auto& body) { Check(body); }, message);
}

}  // namespace ios::schema::detail
