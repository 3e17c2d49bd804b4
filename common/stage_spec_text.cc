#include "common/stage_spec_text.h"

#include <string>

#include "common/op_kinds.h"
#include "common/stage.h"

namespace ios {
namespace detail {
namespace {

void AppendWindow(std::string& out, const Window& w) {
  out += std::to_string(w.h);
  out += 'x';
  out += std::to_string(w.w);
}

}  // namespace

// Every parameter of the op, in a fixed order: this text is part of DB keys,
// so it must never change meaning between versions.
void AppendOpKey(std::string& out, const OpParams& op) {
  switch (op.kind) {
    case OpKind::kConv: {
      const ConvParams& c = op.conv;
      out += "conv(o";
      out += std::to_string(c.out_channels);
      out += ",k";
      AppendWindow(out, c.kernel);
      out += ",s";
      AppendWindow(out, c.stride);
      out += ",p";
      AppendWindow(out, c.padding);
      if (!(c.padding_end_extra == Window{0, 0})) {  // absent otherwise: older keys unchanged
        out += ",pe";
        AppendWindow(out, c.padding_end_extra);
      }
      out += ",d";
      AppendWindow(out, c.dilation);
      out += ",g";
      out += std::to_string(c.groups);
      out += c.bias ? ",b1," : ",b0,";
      out += ToString(c.act);
      out += ')';
      break;
    }
    case OpKind::kPool:
      out += "pool(";
      out += ToString(op.pool.type);
      out += ",k";
      AppendWindow(out, op.pool.kernel);
      out += ",s";
      AppendWindow(out, op.pool.stride);
      out += ",p";
      AppendWindow(out, op.pool.padding);
      if (op.pool.ceil) out += ",ceil";                // absent otherwise: older keys unchanged
      if (op.pool.exclude_padding) out += ",exclpad";  // likewise
      out += ')';
      break;
    case OpKind::kActivation:
      out += "act(";
      out += ToString(op.act);
      out += ')';
      break;
    case OpKind::kEltwise:
      out += op.eltwise == EltwiseType::kAdd ? "add" : "mul";
      break;
    case OpKind::kIdentity:
      out += "id";
      break;
    case OpKind::kSequential:
      out += "seq[";
      for (const OpParams& inner : op.chain) {
        AppendOpKey(out, inner);
        out += ';';
      }
      out += ']';
      break;
    case OpKind::kRegistered:
      out += RegisteredKeyText(op.registered);
      break;
    case OpKind::kInput:
      out += "input";
      break;
  }
}

}  // namespace detail

using detail::AppendInt;
using detail::AppendOpKey;
using detail::AppendRange;
using detail::AppendShape;

std::string StageSpec::Key() const {
  std::string key = "v1;";
  key += ToString(strategy);
  key += ";in=";
  for (const Shape& s : externals) {
    AppendShape(key, s);
    key += ',';
  }
  for (const auto& group : groups) {
    key += ";g=";
    for (const StageOp& op : group) {
      AppendOpKey(key, op.op);
      key += '<';
      for (const auto& term : op.inputs) {
        for (const SliceRef& r : term) {
          key += r.external ? 'X' : 'L';
          AppendInt(key, r.index);
          AppendRange(key, r.begin, r.end);
        }
        key += '|';
      }
      key += '>';
    }
  }
  return key;
}

std::string StageSpec::Describe() const {
  std::string text = ToString(strategy);
  text += " ";
  for (size_t g = 0; g < groups.size(); ++g) {
    text += g ? " || " : "";
    for (size_t i = 0; i < groups[g].size(); ++i) {
      text += i ? " -> " : "";
      text += ios::Describe(groups[g][i].op);
    }
  }
  text += " on ";
  for (size_t i = 0; i < externals.size(); ++i) {
    text += i ? ", " : "";
    AppendShape(text, externals[i]);
  }
  return text;
}

}  // namespace ios
