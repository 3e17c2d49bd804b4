// Operator kinds declared in one place. A kind here is everything the IR
// needs to know about it: its name (IOS JSON "type", stage-key text, wire
// name, descriptions), its integer and float attributes (their JSON fields,
// key text and wire list follow from the declaration), shape inference, a readable
// description and the reference arithmetic every backend is checked
// against. Everything generic about a kind (parsing, printing, the wire,
// validation, the simulator's price, the reference device) reads this
// table; only the real backends (cpu on oneDNN, cuda on cuDNN) add their
// own call for a new kind. Adding a kind: a RegisteredKind enumerator in
// common/graph.h, an entry in op_kinds.cc, and the cpu and cuda calls.
//
// The kinds from before this table (conv, pool, activation, eltwise,
// identity, sequential) keep their own fields: their key text is in every
// profiling DB, and conv and pool have merge rules, fused epilogues and
// weights no generic form would describe better.
#pragma once

#include <bit>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "common/graph.h"

namespace ios {

//! A float attribute's value as RegisteredOp::attributes holds it: its bit
//! pattern, so that equality, hashing and the wire stay those of ints.
constexpr int FloatBits(float value) { return std::bit_cast<int>(value); }
//! The float whose bit pattern FloatBits gave.
constexpr float FloatOfBits(int bits) { return std::bit_cast<float>(bits); }

//! One attribute of a registered kind: an integer, or a float when
//! `is_float` (its value and default then being FloatBits of the float).
struct OpAttribute {
  std::string_view name;   // IOS JSON field and key text: lower case, no digits first
  int default_value = 0;   // a float attribute's: FloatBits(default)
  int min = 0, max = 0;    // inclusive; an integer attribute's range
  std::string_view means;  // one line, for messages and docs
  bool is_float = false;
  //! A float attribute's range: float_min to float_max, both included
  //! unless float_min_excluded (eps: above 0). NaN is never in range.
  float float_min = 0, float_max = 0;
  bool float_min_excluded = false;
};

//! The shape of a registered kind's weights, in the fields exec::ConvWeights
//! holds them in (one container for every operator's weights): `kernel`
//! has out_channels x in_per_group x kernel_h x kernel_w values and `bias`
//! out_channels values when `bias`. What each value means is the kind's
//! (its OpKindSpec::weights says).
struct KindWeightShape {
  int out_channels = 0, in_per_group = 0, kernel_h = 0, kernel_w = 0;
  bool bias = false;
  int64_t kernel_values() const {
    return int64_t{out_channels} * in_per_group * kernel_h * kernel_w;
  }
};

//! A registered op's weight values as its reference arithmetic reads them;
//! both empty for a kind without weights.
struct KindWeightValues {
  std::span<const float> kernel, bias;
};

struct OpKindSpec {
  RegisteredKind kind;
  //! Lower-case letters and '_': never one of the built-in words of keys
  //! or IOS JSON (tested). Never changes: it is in stage keys.
  std::string_view name;
  std::string_view summary;  // what it computes, one line
  std::span<const OpAttribute> attributes;
  //! The output shape for `input` (terms concatenated). Throws ios::Error
  //! naming `where` and the field when the kind cannot take the input.
  Shape (*infer)(const RegisteredOp& op, const Shape& input, const std::string& where);
  //! Readable summary, e.g. "logsoftmax".
  std::string (*describe)(const RegisteredOp& op);
  //! The arithmetic on one sample, NCHW: `in` holds input.c x h x w
  //! values, `out` the output's. Plain loops; the reference device runs
  //! it and the cpu backend is tested against it.
  void (*reference)(const RegisteredOp& op, const Shape& input, const float* in, float* out,
                    const KindWeightValues& weights);
  //! The simulated device prices the kind as element-wise work of this
  //! many flops per output element (one read and one write of memory).
  double sim_flops_per_element = 1;
  //! The weights an op of the kind needs on `input` (what the values mean:
  //! the kind's comment, e.g. in op_kinds_transformer.h); null for a kind
  //! without weights.
  //! Weights are never in stage keys or on the wire: a measured stage gets
  //! seeded random ones, a network its model's.
  KindWeightShape (*weights)(const RegisteredOp& op, const Shape& input) = nullptr;
  //! Flops per sample where they do not grow with the output alone
  //! (attention's are quadratic in the tokens); null: sim_flops_per_element
  //! per output element.
  double (*sim_flops)(const RegisteredOp& op, const Shape& input) = nullptr;
};

//! Whether ops of `kind` carry weights (OpKindSpec::weights).
bool HasWeights(RegisteredKind kind);

//! Every registered kind, in the order of the RegisteredKind enum.
std::span<const OpKindSpec> RegisteredKinds();

//! The declaration of `kind`.
const OpKindSpec& SpecOf(RegisteredKind kind);

//! The kind named `name` ("softmax"), or nullptr.
const OpKindSpec* RegisteredKindNamed(std::string_view name);

//! "softmax, ..." : the registered names, for messages.
std::string RegisteredKindNames();

//! A kRegistered op of `kind` with every attribute at its default.
OpParams MakeRegisteredOp(RegisteredKind kind);

//! The value of the attribute named `name` of `op` (a float attribute's
//! bits: FloatAttributeOf reads it as a float), or nullopt when the kind
//! declares no such attribute.
std::optional<int> AttributeOf(const RegisteredOp& op, std::string_view name);

//! The float attribute named `name` of `op`, or nullopt when the kind
//! declares no such attribute or declares it an integer.
std::optional<float> FloatAttributeOf(const RegisteredOp& op, std::string_view name);

//! Sets the attribute named `name`; throws ios::Error naming `where` when
//! the kind has no such attribute.
void SetAttribute(RegisteredOp& op, std::string_view name, int value, const std::string& where);

//! Sets the float attribute named `name`; throws ios::Error naming `where`
//! when the kind has no such attribute or declares it an integer.
void SetFloatAttribute(RegisteredOp& op, std::string_view name, float value,
                       const std::string& where);

//! `value` (an entry of RegisteredOp::attributes) as key text and messages
//! print it: an integer in decimal; a float as the shortest decimal that
//! reads back to the same bits ("1e-06", "0.5").
std::string AttributeText(const OpAttribute& attribute, int value);

//! Checks that `op` has one value per declared attribute, each in range.
//! Throws ios::Error naming `where`, the attribute and its range.
void CheckAttributes(const RegisteredOp& op, const std::string& where);

//! Stage-key text: name "(" (attribute "=" value ("," ...)*)? ")", every
//! attribute in declared order, each value as AttributeText prints it, e.g.
//! "softmax(log=0)", "layernorm(eps=1e-06)".
std::string RegisteredKeyText(const RegisteredOp& op);

}  // namespace ios
