// How a stage is written as text: the canonical key's pieces, shared by
// StageSpec::Key (common/stage_spec_text.cc) and StageKeyer (common/stage.cc),
// which must write the same bytes for the same stage.
#pragma once

#include <charconv>
#include <string>

#include "common/graph.h"

namespace ios::detail {

inline void AppendShape(std::string& out, const Shape& s) {
  out += std::to_string(s.c);
  out += 'x';
  out += std::to_string(s.h);
  out += 'x';
  out += std::to_string(s.w);
}

inline void AppendInt(std::string& out, int value) {
  char buffer[16];
  const auto [end, ec] = std::to_chars(buffer, buffer + sizeof buffer, value);
  out.append(buffer, end);
}

inline void AppendRange(std::string& out, int begin, int end) {
  out += '[';
  AppendInt(out, begin);
  out += ':';
  AppendInt(out, end);
  out += "]+";
}

//! Appends the op's key text (common/stage_spec_text.cc).
void AppendOpKey(std::string& out, const OpParams& op);

}  // namespace ios::detail
