#include "common/stage_key.h"

#include <algorithm>
#include <charconv>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include "common/activation.h"
#include "common/error.h"
#include "common/op_kinds.h"
#include "common/slices.h"

namespace ios {
namespace {

// Recursive descent over the grammar StageSpec::Key() writes (common/stage_spec_text.cc):
//   key    := "v1;" strategy ";in=" (shape ",")* (";g=" op+)*
//   op     := optext "<" (slice* "|")* ">"
//   slice  := ("X" | "L") int "[" int ":" int "]+"
//   optext := "conv(o" int ",k" win ",s" win ",p" win ",d" win ",g" int ",b" ("0"|"1") "," act ")"
//           | "pool(" pooltype ",k" win ",s" win ",p" win [",ceil"] [",exclpad"] ")"
//           | "act(" act ")"
//           | "add" | "mul" | "id" | "seq[" (optext ";")* "]"
//           | registered "(" (attribute "=" int ("," attribute "=" int)*)? ")"
//   registered, attribute := names declared in common/op_kinds.h
//   win := int "x" int,  shape := int "x" int "x" int
class KeyParser {
 public:
  explicit KeyParser(std::string_view key) : key_(key) {}

  StageSpec Parse() {
    StageSpec spec;
    Expect("v1;");
    spec.strategy =
        NameOf({Strategy::kParallel, Strategy::kMerge}, "a strategy (parallel or merge)");
    Expect(";in=");
    while (!AtEnd() && Peek() != ';') {
      spec.externals.push_back(ShapeText());
      Expect(",");
    }
    while (!AtEnd()) {
      Expect(";g=");
      std::vector<StageOp>& group = spec.groups.emplace_back();
      do {
        group.push_back(Op());
      } while (!AtEnd() && Peek() != ';');
    }
    if (spec.groups.empty()) Fail("a group (\";g=\")", at_);
    InferOutputs(spec);
    return spec;
  }

 private:
  bool AtEnd() const { return at_ >= key_.size(); }
  char Peek() const { return AtEnd() ? '\0' : key_[at_]; }

  [[noreturn]] void Fail(const std::string& expected, size_t where) const {
    const std::string_view rest = key_.substr(std::min(where, key_.size()), 24);
    throw Error(
        "stage key, byte " + std::to_string(where) + ": expected " + expected +
        (rest.empty() ? std::string(" at the end") : ", found '" + std::string(rest) + "'"));
  }

  bool Accept(std::string_view text) {
    if (key_.substr(at_, text.size()) != text) return false;
    at_ += text.size();
    return true;
  }
  void Expect(std::string_view text) {
    if (!Accept(text)) Fail("'" + std::string(text) + "'", at_);
  }

  int Int() {
    int value = 0;
    const char* begin = key_.data() + at_;
    const auto [end, error] = std::from_chars(begin, key_.data() + key_.size(), value);
    if (error != std::errc() || end == begin) Fail("a number", at_);
    at_ += static_cast<size_t>(end - begin);
    return value;
  }

  // A float attribute as AttributeText prints it; the shortest round-trip
  // decimal reads back to the same bits.
  float Float() {
    float value = 0;
    const char* begin = key_.data() + at_;
    const auto [end, error] = std::from_chars(begin, key_.data() + key_.size(), value);
    if (error != std::errc() || end == begin) Fail("a decimal number", at_);
    at_ += static_cast<size_t>(end - begin);
    return value;
  }

  // Lower-case letters and underscores: strategy, activation and pool names.
  std::string Name() {
    const size_t begin = at_;
    // Letters and '_', then digits too ("relu6"): in the grammar a name is
    // always followed by ',' or ')'.
    while (!AtEnd() && ((Peek() >= 'a' && Peek() <= 'z') || Peek() == '_' ||
                        (at_ > begin && Peek() >= '0' && Peek() <= '9'))) {
      ++at_;
    }
    return std::string(key_.substr(begin, at_ - begin));
  }

  Window WindowText() {
    Window w;
    w.h = Int();
    Expect("x");
    w.w = Int();
    return w;
  }

  Shape ShapeText() {
    Shape s;
    s.c = Int();
    Expect("x");
    s.h = Int();
    Expect("x");
    s.w = Int();
    return s;
  }

  // The value of `values` whose ToString is the next name.
  template <typename Enum>
  Enum NameOf(std::initializer_list<Enum> values, const char* expected) {
    const size_t begin = at_;
    const std::string name = Name();
    for (Enum value : values) {
      if (name == ToString(value)) return value;
    }
    Fail(expected, begin);
  }

  Activation ActivationName() {
    const size_t begin = at_;
    if (const std::optional<Activation> act = ActivationNamed(Name())) return *act;
    Fail("an activation (none, " + ActivationNames() + ")", begin);
  }

  PoolType PoolName() {
    return NameOf({PoolType::kMax, PoolType::kAvg, PoolType::kGlobalMax, PoolType::kGlobalAvg},
                  "a pooling kind (max, avg, global_max, global_avg)");
  }

  // A kind of common/op_kinds.h, its attributes in declared order.
  std::optional<OpParams> RegisteredText() {
    const size_t begin = at_;
    const OpKindSpec* spec = RegisteredKindNamed(Name());
    if (spec == nullptr || !Accept("(")) {
      at_ = begin;
      return std::nullopt;
    }
    OpParams op = MakeRegisteredOp(spec->kind);
    for (size_t i = 0; i < spec->attributes.size(); ++i) {
      if (i > 0) Expect(",");
      Expect(spec->attributes[i].name);
      Expect("=");
      op.registered.attributes[i] = spec->attributes[i].is_float ? FloatBits(Float()) : Int();
    }
    Expect(")");
    return op;
  }

  OpParams OpText() {
    if (std::optional<OpParams> registered = RegisteredText()) return *std::move(registered);
    OpParams op;
    if (Accept("conv(o")) {
      op.kind = OpKind::kConv;
      ConvParams& c = op.conv;
      c.out_channels = Int();
      Expect(",k");
      c.kernel = WindowText();
      Expect(",s");
      c.stride = WindowText();
      Expect(",p");
      c.padding = WindowText();
      if (Accept(",pe")) c.padding_end_extra = WindowText();
      Expect(",d");
      c.dilation = WindowText();
      Expect(",g");
      c.groups = Int();
      if (Accept(",b1,")) {
        c.bias = true;
      } else {
        Expect(",b0,");
        c.bias = false;
      }
      c.act = ActivationName();
      Expect(")");
    } else if (Accept("pool(")) {
      op.kind = OpKind::kPool;
      op.pool.type = PoolName();
      Expect(",k");
      op.pool.kernel = WindowText();
      Expect(",s");
      op.pool.stride = WindowText();
      Expect(",p");
      op.pool.padding = WindowText();
      op.pool.ceil = Accept(",ceil");
      op.pool.exclude_padding = Accept(",exclpad");
      Expect(")");
    } else if (Accept("act(")) {
      op.kind = OpKind::kActivation;
      op.act = ActivationName();
      Expect(")");
    } else if (Accept("add")) {
      op.kind = OpKind::kEltwise;
      op.eltwise = EltwiseType::kAdd;
    } else if (Accept("mul")) {
      op.kind = OpKind::kEltwise;
      op.eltwise = EltwiseType::kMul;
    } else if (Accept("id")) {
      op.kind = OpKind::kIdentity;
    } else if (Accept("seq[")) {
      op.kind = OpKind::kSequential;
      while (!Accept("]")) {
        op.chain.push_back(OpText());
        Expect(";");
      }
    } else {
      Fail("an operator (conv, pool, act, add, mul, id, seq, " + RegisteredKindNames() + ")", at_);
    }
    return op;
  }

  StageOp Op() {
    StageOp op;
    op.op = OpText();
    Expect("<");
    while (!Accept(">")) {
      std::vector<SliceRef>& term = op.inputs.emplace_back();
      while (!Accept("|")) {
        SliceRef ref;
        if (Accept("X")) {
          ref.external = true;
        } else if (Accept("L")) {
          ref.external = false;
        } else {
          Fail("a slice (X or L), '|' or '>'", at_);
        }
        ref.index = Int();
        Expect("[");
        ref.begin = Int();
        Expect(":");
        ref.end = Int();
        Expect("]+");
        term.push_back(ref);
      }
    }
    return op;
  }

  // Outputs are not in the key: they follow from the inputs, op by op.
  static void InferOutputs(StageSpec& spec) {
    for (size_t g = 0; g < spec.groups.size(); ++g) {
      for (size_t k = 0; k < spec.groups[g].size(); ++k) {
        const std::string where =
            "stage key, group " + std::to_string(g) + " op " + std::to_string(k);
        try {
          const ResolvedInput input = ResolveStageInput(spec, g, k);
          spec.groups[g][k].output = InferOpOutput(spec.groups[g][k].op, input.TermShapes(), where);
        } catch (const InputError& e) {
          throw Error(where + ": " + e.what());
        }
      }
    }
  }

  std::string_view key_;
  size_t at_ = 0;
};

}  // namespace

StageSpec ParseStageKey(std::string_view key) { return KeyParser(key).Parse(); }

}  // namespace ios
