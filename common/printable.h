// Names from model files are untrusted text: printed raw, a newline forges a
// log line and an escape sequence drives the terminal. Every message and
// report that shows a node, model or block name passes it through here.
#pragma once

#include <string>
#include <string_view>

namespace ios {

//! `text` with everything that is not printable escaped: backslash as `\\`,
//! tab, newline and carriage return as `\t`, `\n`, `\r`, other C0 controls,
//! DEL and bytes that are not valid UTF-8 as `\xHH`, C1 controls (U+0080 to
//! U+009F) as `\u0080`...`\u009f`. Printable ASCII and valid UTF-8 pass
//! unchanged, so ordinary names read as written.
std::string Printable(std::string_view text);

//! Printable(text) between single quotes, with `'` escaped as `\'`: the form
//! error messages use, so an empty name shows as `''`.
std::string Quoted(std::string_view text);

}  // namespace ios
