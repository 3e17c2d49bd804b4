// The page's script and style, compiled in from report/assets/ (see
// report/CMakeLists.txt). Internal to ios_report.
#pragma once

namespace ios::report::detail {

extern const char* const kReportJs;
extern const char* const kReportCss;

}  // namespace ios::report::detail
