// Pieces of RenderHtml, internal to ios_report (split so each file stays
// small and the checks are testable through RenderHtml alone).
#pragma once

#include <string>
#include <string_view>

#include "report/report.h"

namespace ios::report::detail {

//! Throws ios::Error naming the field when `input` cannot be drawn
//! consistently (RenderHtml's contract lists the cases).
void CheckInput(const ReportInput& input);

//! The page's data blob: the graph's drawing, each schedule's timeline and
//! the multi-device lanes, laid out (report/layout.h), as compact JSON in
//! which '<', '>' and '&' appear only as \u003c, \u003e, \u0026, so no
//! string in it can end the <script> element that holds it.
std::string PageData(const ReportInput& input);

//! Text for HTML content and attribute values: & < > " ' escaped.
std::string EscapeHtml(std::string_view text);

}  // namespace ios::report::detail
