#include "common/printable.h"

#include <cstdint>

namespace ios {
namespace {

void AppendHex(std::string& out, const char* prefix, unsigned value, int digits) {
  static constexpr char kDigits[] = "0123456789abcdef";
  out += prefix;
  for (int shift = 4 * (digits - 1); shift >= 0; shift -= 4) out += kDigits[(value >> shift) & 0xf];
}

// Length of the valid UTF-8 sequence starting at text[i] (2 to 4), or 0 when
// the bytes there are not one (overlong forms and surrogates included).
size_t Utf8Length(std::string_view text, size_t i, uint32_t& code_point) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(text[i + k]); };
  const unsigned char lead = byte(0);
  size_t length = 0;
  uint32_t min = 0;
  if (lead >= 0xc2 && lead <= 0xdf) {
    length = 2, code_point = lead & 0x1f, min = 0x80;
  } else if (lead >= 0xe0 && lead <= 0xef) {
    length = 3, code_point = lead & 0x0f, min = 0x800;
  } else if (lead >= 0xf0 && lead <= 0xf4) {
    length = 4, code_point = lead & 0x07, min = 0x10000;
  } else {
    return 0;
  }
  if (i + length > text.size()) return 0;
  for (size_t k = 1; k < length; ++k) {
    if ((byte(k) & 0xc0) != 0x80) return 0;
    code_point = (code_point << 6) | (byte(k) & 0x3f);
  }
  if (code_point < min || code_point > 0x10ffff) return 0;
  if (code_point >= 0xd800 && code_point <= 0xdfff) return 0;
  return length;
}

void AppendEscaped(std::string& out, std::string_view text, bool escape_quote) {
  for (size_t i = 0; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c < 0x80) {
      if (c == '\\') {
        out += "\\\\";
      } else if (c == '\'' && escape_quote) {
        out += "\\'";
      } else if (c == '\n') {
        out += "\\n";
      } else if (c == '\t') {
        out += "\\t";
      } else if (c == '\r') {
        out += "\\r";
      } else if (c < 0x20 || c == 0x7f) {
        AppendHex(out, "\\x", c, 2);
      } else {
        out += static_cast<char>(c);
      }
      ++i;
      continue;
    }
    uint32_t code_point = 0;
    const size_t length = Utf8Length(text, i, code_point);
    if (length == 0) {
      AppendHex(out, "\\x", c, 2);
      ++i;
    } else if (code_point <= 0x9f) {
      AppendHex(out, "\\u", code_point, 4);  // C1 control: some terminals obey it
      i += length;
    } else {
      out.append(text.substr(i, length));
      i += length;
    }
  }
}

}  // namespace

std::string Printable(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  AppendEscaped(out, text, /*escape_quote=*/false);
  return out;
}

std::string Quoted(std::string_view text) {
  std::string out = "'";
  out.reserve(text.size() + 2);
  AppendEscaped(out, text, /*escape_quote=*/true);
  out += '\'';
  return out;
}

}  // namespace ios
