// RenderHtml: the page around the data blob. The tables are written here as
// plain HTML so the key numbers read without JavaScript; the drawings are
// made by report/assets/report.js from the blob.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "report/assets.h"
#include "report/html_parts.h"
#include "report/report.h"

namespace ios::report {
namespace {

using detail::EscapeHtml;

// The page may fetch, connect to and load nothing: every resource is inline.
// (A meta CSP applies to what follows it, so it comes before any script.)
constexpr const char* kCsp =
    "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
    "script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; "
    "form-action 'none'\">";

// Records what would otherwise only reach a console nobody reads, for the
// page's self-test (report.js copies the list into #selftest).
constexpr const char* kErrorGuard =
    "<script>window.iosErrors=[];"
    // A failed <img>/<script>/<link> load fires a plain Event at the element
    // (no message), seen here only because the listener captures.
    "addEventListener('error',function(e){var t=e.target,u=t&&(t.currentSrc||t.src||t.href);"
    "iosErrors.push(t&&t!==window&&u?'cannot load '+u:'error: '+e.message)},true);"
    "addEventListener('unhandledrejection',function(e){iosErrors.push('rejection: '+e.reason)});"
    "addEventListener('securitypolicyviolation',function(e){iosErrors.push('csp: '+"
    "e.violatedDirective+' '+e.blockedURI)});"
    "(function(){var c=console.error;console.error=function(){iosErrors.push('console: '+"
    "[].join.call(arguments,' '));c.apply(console,arguments)}})();</script>";

std::string Fixed(double v, int digits) {
  if (!std::isfinite(v)) return "&ndash;";
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.*f", digits, v);
  return buffer;
}

// Small models' peaks are kilobytes: "0.00 MiB" would hide them.
std::string Bytes(int64_t bytes) {
  if (bytes < 0) return "&ndash;";
  if (bytes < 1024) return std::to_string(bytes) + " B";
  const double b = static_cast<double>(bytes);
  if (bytes < 1024 * 1024) return Fixed(b / 1024.0, 1) + " KiB";
  return Fixed(b / (1024.0 * 1024.0), 2) + " MiB";
}

std::string MeasuredText(const std::optional<EndToEnd>& e) {
  if (!e) return "&ndash;";
  if (!e->error.empty()) return "failed: " + EscapeHtml(e->error);
  std::string text = Fixed(e->median_ms, 3) + " &plusmn; " + Fixed(e->spread_ms, 3);
  std::string how = e->how;
  if (e->from_db) how += how.empty() ? "from the DB" : ", from the DB";
  if (!how.empty()) text += " <span class=\"how\">(" + EscapeHtml(how) + ")</span>";
  return text;
}

std::string CompareTable(const ReportInput& input) {
  double sequential = kNoFigure;
  for (const ScheduleRow& s : input.schedules) {
    if (s.name == "sequential") sequential = s.predicted_ms;
  }
  std::string out =
      "<table class=\"num\" id=\"compare-table\"><thead><tr><th>schedule</th><th>predicted "
      "(DP sum) ms</th><th>measured end to end ms</th><th>speed-up over sequential "
      "(DP)</th><th>stages</th>"
      "<th>most lanes</th><th>peak activations</th></tr></thead><tbody>";
  for (const ScheduleRow& s : input.schedules) {
    size_t lanes = 0;
    for (const StageRow& stage : s.stages) {
      lanes = std::max(lanes, stage.strategy == Strategy::kMerge ? size_t{1} : stage.groups.size());
    }
    out += std::string("<tr") + (s.returned ? " class=\"returned\"" : "") + "><td>" +
           EscapeHtml(s.name) + (s.returned ? " (returned)" : "") + "</td><td>" +
           Fixed(s.predicted_ms, 3) + "</td><td>" + MeasuredText(s.measured) + "</td><td>" +
           (std::isfinite(sequential) && s.predicted_ms > 0
                ? Fixed(sequential / s.predicted_ms, 2) + "&times;"
                : "&ndash;") +
           "</td><td>" + std::to_string(s.stages.size()) + "</td><td>" + std::to_string(lanes) +
           "</td><td>" + Bytes(s.peak_bytes) + "</td></tr>";
  }
  return out + "</tbody></table>";
}

std::string SearchTables(const SearchFacts& f) {
  std::string out =
      "<table class=\"num\" id=\"parts-table\"><thead><tr><th>block</th><th>part</th>"
      "<th>piece</th><th>ops</th><th>width</th><th>solved</th><th>states</th>"
      "<th>transitions</th><th>schedules</th><th>stages</th><th>measured</th><th>stored</th>"
      "<th>earlier part</th><th>skipped</th></tr></thead><tbody>";
  for (const PartRow& p : f.parts) {
    const bool approximate = p.dp != "exact";
    out += std::string("<tr") + (p.unused ? " class=\"unused\"" : "") + "><td>" +
           std::to_string(p.block) + "</td><td>" + std::to_string(p.part) + "</td><td>" +
           std::to_string(p.piece) + "</td><td>" + std::to_string(p.operators) + "</td><td>" +
           std::to_string(p.width) + "</td><td" + (approximate ? " class=\"approx\"" : "") + ">" +
           EscapeHtml(p.dp) + (approximate ? " (approximate)" : "") + (p.unused ? ", unused" : "") +
           "</td><td>" + std::to_string(p.states) + "</td><td>" + std::to_string(p.transitions) +
           "</td><td>" + Fixed(p.schedules, 0) + "</td><td>" + std::to_string(p.stages) +
           "</td><td>" + std::to_string(p.measured) + "</td><td>" + std::to_string(p.stored) +
           "</td><td>" + std::to_string(p.earlier) + "</td><td>" + std::to_string(p.skipped) +
           "</td></tr>";
  }
  out += "</tbody></table><table class=\"num\" id=\"facts-table\"><tbody>";
  const auto row = [&](const std::string& name, const std::string& value) {
    out += "<tr><th>" + name + "</th><td>" + value + "</td></tr>";
  };
  row("distinct stages / occurrences",
      std::to_string(f.distinct_stages) + " / " + std::to_string(f.stage_occurrences));
  row("measured now / reused from the DB / failed", std::to_string(f.measured) + " / " +
                                                        std::to_string(f.reused) + " / " +
                                                        std::to_string(f.failed));
  row("skipped by the lazy bounds (never measured)", std::to_string(f.skipped));
  row("lazy rounds / bound violations / parts measured in full",
      std::to_string(f.lazy_rounds) + " / " + std::to_string(f.bound_violations) + " / " +
          std::to_string(f.parts_measured_in_full));
  row("phases: enumerate / measure / solve / verify (s)",
      Fixed(f.enumerate_s, 2) + " / " + Fixed(f.measure_s, 2) + " / " + Fixed(f.solve_s, 2) +
          " / " + Fixed(f.verify_s, 2));
  row("verification passes",
      std::to_string(f.passes_run) + " of " + std::to_string(f.passes_planned));
  row("measure mode, settings", EscapeHtml(f.measure_mode) + ", " + EscapeHtml(f.settings_key));
  out += "</tbody></table>";
  if (!f.warnings.empty()) {
    out += "<ul class=\"warnings\">";
    for (const std::string& w : f.warnings) out += "<li>" + EscapeHtml(w) + "</li>";
    out += "</ul>";
  }
  return out;
}

std::string SettingName(const MatrixSetting& s) {
  return "batch " + std::to_string(s.batch) + " on " + EscapeHtml(s.device) +
         (s.simulated ? " (sim)" : "");
}

// Ratio 1.00 white to 1.20 and beyond full red: the paper's penalties are
// 0-15%, so the scale saturates just past them.
std::string HeatStyle(double ratio) {
  if (!std::isfinite(ratio)) return "";
  const double t = std::clamp((ratio - 1.0) / 0.2, 0.0, 1.0);
  const int other = static_cast<int>(std::lround(255 - 175 * t));
  return " style=\"background:rgb(255," + std::to_string(other) + "," + std::to_string(other) +
         ")\"";
}

std::string MatrixTable(const MatrixView& m) {
  // A DP sum leaves out what only an end-to-end run sees (launch gaps,
  // caches warm across stages), so beside measured cells it is not the same
  // kind of figure: such cells are marked.
  bool any_measured = false;
  for (const auto& row : m.cells) {
    for (const MatrixCell& cell : row)
      any_measured = any_measured || std::isfinite(cell.measured_ms);
  }
  bool any_dp_sum = false;
  std::string out =
      "<p>Rows: the schedule optimised for a setting; columns: the setting it runs at. Each "
      "cell is its time divided by the best of its column (1.00 = the best there); raw "
      "milliseconds on hover. The IOS paper's Table 3 is the transpose.</p>"
      "<table class=\"num heat\" id=\"matrix-table\"><thead><tr><th>optimised for \\ run at</th>";
  for (const MatrixSetting& s : m.settings) out += "<th>" + SettingName(s) + "</th>";
  out += "</tr></thead><tbody>";
  for (size_t r = 0; r < m.cells.size(); ++r) {
    out += "<tr><th>" +
           (r < m.settings.size() ? SettingName(m.settings[r])
                                  : EscapeHtml(m.extra_rows[r - m.settings.size()])) +
           "</th>";
    for (size_t c = 0; c < m.cells[r].size(); ++c) {
      const MatrixCell& cell = m.cells[r][c];
      const double ratio = Normalised(m, r, c);
      const bool dp_sum =
          any_measured && !std::isfinite(cell.measured_ms) && std::isfinite(cell.predicted_ms);
      any_dp_sum = any_dp_sum || dp_sum;
      out += "<td data-r=\"" + std::to_string(r) + "\" data-c=\"" + std::to_string(c) + "\"" +
             (dp_sum ? " class=\"dpsum\"" : "") + " data-ms=\"" + Fixed(CellMs(cell), 4) + "\"" +
             HeatStyle(ratio) + " title=\"predicted " + Fixed(cell.predicted_ms, 3) +
             " ms, measured " + Fixed(cell.measured_ms, 3) + " ms (" + EscapeHtml(cell.source) +
             ")\">" + Fixed(ratio, 3) + (r == c ? "*" : "") + (dp_sum ? "&dagger;" : "") + "</td>";
    }
    out += "</tr>";
  }
  out += "</tbody></table><p>* the schedule optimised for the column's own setting.";
  if (any_dp_sum) {
    out +=
        "<br>&dagger; no end-to-end run: the DP's sum of stage latencies, beside cells "
        "measured end to end (a sum leaves out the gaps between stages).";
  }
  out +=
      "</p><p>Stages "
      "measured: " +
      std::to_string(m.stages_measured) +
      ", network runs measured: " + std::to_string(m.runs_measured) + ".</p>";
  return out;
}

std::string Section(const char* id, const char* heading, const std::string& body) {
  return std::string("<section class=\"view\" id=\"v-") + id + "\"><h2>" + heading + "</h2>" +
         body + "</section>";
}

}  // namespace

std::string RenderHtml(const ReportInput& input) {
  detail::CheckInput(input);
  const std::string title = !input.title.empty() ? input.title
                                                 : input.model + " on " + input.device.name +
                                                       ", batch " + std::to_string(input.batch);
  std::string page = "<!DOCTYPE html><html lang=\"en\"><head>";
  page += kCsp;
  page += "<meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width\">";
  page += "<title>" + EscapeHtml(title) + "</title><style>";
  page += detail::kReportCss;
  page += "</style>";
  page += kErrorGuard;
  // Producers may leave the tool, version or time empty (a stored search
  // has no version): such fields leave no separator behind.
  std::string meta;
  const auto add = [&meta](const std::string& field) {
    if (field.empty()) return;
    meta += (meta.empty() ? "" : " &middot; ") + field;
  };
  add(EscapeHtml(input.model));
  add(EscapeHtml(input.device.name));
  add("batch " + std::to_string(input.batch));
  add(std::to_string(input.graph.OperatorCount()) + " operators");
  add(EscapeHtml(input.tool) + (input.tool.empty() || input.version.empty() ? "" : " ") +
      EscapeHtml(input.version));
  add(EscapeHtml(input.generated_at));
  page +=
      "</head><body><header><h1>" + EscapeHtml(title) + "</h1><p class=\"meta\">" + meta + "</p>";
  if (input.device.simulated) {
    page +=
        "<p class=\"banner\" id=\"simulated\">SIMULATED: every latency here comes from "
        "an analytical model of " +
        EscapeHtml(input.device.name) + ", not from a measurement.</p>";
  }
  for (const std::string& note : input.notes) {
    page += "<p class=\"note\">" + EscapeHtml(note) + "</p>";
  }
  page +=
      "<nav id=\"views\"></nav></header><noscript><p class=\"note\">The timeline and "
      "graph drawings need JavaScript; the tables below do not.</p></noscript><main>";
  page += Section("timeline", "Timeline",
                  "<p class=\"legend\">One row per lane (a cuda stream, a cpu thread group, a "
                  "modelled stream); a row name in italics: its stages run that row on "
                  "different lanes (hover it for the list). Stage boxes are as long as the "
                  "stage's measured latency; operators inside are sized by their latency "
                  "alone, scaled so the longest lane fills the stage. Hatched: merged "
                  "convolutions. Thick lines: block boundaries.</p><div class=\"pick\"></div>"
                  "<div id=\"timeline\" class=\"draw\"></div>");
  page += Section("graph", "Graph",
                  "<p class=\"legend\">Operators coloured by their stage in the chosen "
                  "schedule; hover for shapes, stage key, latency and where it was "
                  "measured.</p><div class=\"pick\"></div><div id=\"graph\" class=\"draw\"></div>");
  page += Section("compare", "Schedules compared", CompareTable(input));
  if (input.search) page += Section("search", "The search", SearchTables(*input.search));
  if (input.multi) {
    page += Section(
        "multi", "Devices",
        std::string("<p class=\"legend\">One group of rows per device and a link "
                    "row for the copies between them.") +
            (input.multi->one_device_kept ? " HIOS found no gain and kept everything on one device."
                                          : "") +
            "</p><div id=\"multi\" class=\"draw\"></div>");
  }
  if (input.matrix) page += Section("matrix", "Specialization matrix", MatrixTable(*input.matrix));
  page += "</main><div id=\"tip\" hidden></div><script type=\"application/json\" id=\"data\">";
  page += detail::PageData(input);
  page += "</script><script>";
  page += detail::kReportJs;
  page += "</script></body></html>\n";
  return page;
}

}  // namespace ios::report
