// Opens each kind of report in headless Chromium and checks what a person
// would see: the page's own self-test (rendered, no errors, nothing fetched)
// and, not trusting it alone, the drawn boxes in the dumped DOM against the
// layout computed here from the same ReportInput. One launch per (page,
// view) does both the DOM dump and the screenshot, since each launch costs
// 1-4 s on CI's two cores. Skips visibly without Chromium (Debian's
// `chromium`; $IOS_CHROMIUM points elsewhere) and in sanitized builds
// (Chromium is not the code under test there, and the launches cost time).
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "report/layout.h"
#include "report/report.h"
#include "tests/report/sample_inputs.h"
#include "tests/testing/process.h"
#include "tests/testing/sanitizers.h"

namespace ios::report {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string Chromium() {
  const char* env = std::getenv("IOS_CHROMIUM");
  return env != nullptr && *env != '\0' ? env : "/usr/bin/chromium";
}

#define IOS_REQUIRE_CHROMIUM()                                                              \
  do {                                                                                      \
    if (::ios::testing::kSanitized) GTEST_SKIP() << "sanitized build: no browser launches"; \
    if (access(Chromium().c_str(), X_OK) != 0)                                              \
      GTEST_SKIP() << "chromium not found (apt-get install chromium)";                      \
  } while (false)

// What one launch saw.
struct Page {
  std::string dom;   // the DOM after the load event
  json selftest;     // the page's #selftest, or null when it wrote none
  std::string diag;  // exit code and the end of Chromium's stderr, for failure messages
};

// The slice of `dom` from the element with id `id` to the first `end` after it.
std::string Slice(const std::string& dom, const std::string& id, const std::string& end) {
  const size_t from = dom.find("id=\"" + id + "\"");
  if (from == std::string::npos) return "";
  const size_t to = dom.find(end, from);
  return dom.substr(from, to == std::string::npos ? std::string::npos : to - from);
}

// Every `<tag ...>` opening tag in `html` whose text holds `with`.
// (A scan, not std::regex: libstdc++'s regex recurses per character and
// overflows the stack on a 2,000-operator DOM.)
std::vector<std::string> Tags(const std::string& html, const std::string& tag,
                              const std::string& with = "") {
  std::vector<std::string> tags;
  for (size_t at = html.find("<" + tag + " "); at != std::string::npos;
       at = html.find("<" + tag + " ", at + 1)) {
    const std::string text = html.substr(at, html.find('>', at) - at);
    if (text.find(with) != std::string::npos) tags.push_back(text);
  }
  return tags;
}

// The value of attribute `name` in an opening tag; nullopt when absent.
std::optional<std::string> Attr(const std::string& tag, const std::string& name) {
  const size_t at = tag.find(" " + name + "=\"");
  if (at == std::string::npos) return std::nullopt;
  const size_t from = at + name.size() + 3;
  return tag.substr(from, tag.find('"', from) - from);
}

double Number(const std::string& tag, const std::string& name) {
  const auto value = Attr(tag, name);
  return value ? std::strtod(value->c_str(), nullptr) : std::nan("");
}

// Opens `html` at `view` ("" for none) in one launch: the DOM dump and,
// with `shoot`, IOS_BINARY_DIR/report-screenshots/<name>-<view>.png.
Page OpenFile(const fs::path& dir, const fs::path& html, const std::string& name,
              const std::string& view, bool shoot) {
  const ios::testing::TempDir profile("ios-chromium-profile");
  const fs::path dom = dir / (name + "-" + view + ".dom.html");
  // A fresh profile per launch (no state carried between pages); every host
  // unresolvable, so even a page that escaped its CSP could reach nothing.
  std::string args =
      "--headless --no-sandbox --disable-gpu --disable-dev-shm-usage --no-first-run "
      "--disable-extensions --disable-background-networking --disable-component-update "
      "--host-resolver-rules='MAP * ~NOTFOUND' --hide-scrollbars --window-size=1400,900 "
      "--user-data-dir=" +
      ios::testing::ShellQuote(profile.path().string());
  if (shoot) {
    const fs::path shots = fs::path(IOS_BINARY_DIR) / "report-screenshots";
    fs::create_directories(shots);
    const fs::path png = shots / (name + "-" + (view.empty() ? "default" : view) + ".png");
    fs::remove(png);
    args += " --screenshot=" + ios::testing::ShellQuote(png.string());
  }
  const std::string url = "file://" + html.string() + (view.empty() ? "" : "#view=" + view);
  // The DOM goes to a file, not the pipe: a renderer left behind by a
  // killed browser cannot then hold the test's pipe open.
  args += " --dump-dom " + ios::testing::ShellQuote(url) + " >" +
          ios::testing::ShellQuote(dom.string());
  const ios::testing::CliResult run = ios::testing::RunBinary(dir, Chromium(), args, 60);
  Page page;
  page.dom = ios::testing::ReadFile(dom);
  page.diag = url + ": chromium exited " + std::to_string(run.exit_code) +
              (run.exit_code == 124 ? " (killed after 60 s)" : "") + "; stderr ends:\n" +
              run.err.substr(run.err.size() > 1500 ? run.err.size() - 1500 : 0);
  const std::string open = "<script type=\"application/json\" id=\"selftest\">";
  const size_t at = page.dom.find(open);
  if (at != std::string::npos) {
    const size_t from = at + open.size();
    page.selftest = json::parse(page.dom.substr(from, page.dom.find("</script>", from) - from),
                                nullptr, /*allow_exceptions=*/false);
    if (page.selftest.is_discarded()) page.selftest = nullptr;
  }
  return page;
}

// Renders `input` to dir/<name>.html and opens it as OpenFile does.
Page Open(const fs::path& dir, const std::string& name, const ReportInput& input,
          const std::string& view, bool shoot) {
  const fs::path html = dir / (name + ".html");
  EXPECT_TRUE(ios::testing::WriteFile(html, RenderHtml(input))) << html;
  return OpenFile(dir, html, name, view, shoot);
}

// Exactly one view is shown, and it is `view`: the page hides the others
// with `body.js .view { display: none }` (report.css).
void ExpectShown(const Page& page, const std::string& view) {
  std::vector<std::string> shown;
  for (const std::string& tag : Tags(page.dom, "section", "class=\"view")) {
    if (Attr(tag, "class").value_or("").find("shown") != std::string::npos) {
      shown.push_back(Attr(tag, "id").value_or("?"));
    }
  }
  EXPECT_EQ(shown, std::vector<std::string>{"v-" + view}) << page.diag;
  const std::vector<std::string> body = Tags(page.dom, "body");
  ASSERT_EQ(body.size(), 1u) << page.diag;
  EXPECT_NE(body[0].find("js"), std::string::npos) << "the page's script did not run";
}

// The self-test is clean and the timeline, graph (and multi-device and matrix
// views when present) hold what the C++ layout of `input` says they hold.
void ExpectDrawnAsLaidOut(const ReportInput& input, const Page& page) {
  ASSERT_TRUE(page.selftest.is_object()) << "no #selftest in the DOM; " << page.diag;
  const json& t = page.selftest;
  EXPECT_EQ(t.value("rendered", false), true) << t.dump();
  EXPECT_EQ(t.value("errors", json::array()), json::array()) << t.dump();
  EXPECT_EQ(t.value("resources", -1), 0) << "the page fetched something: " << t.dump();
  // The CSP must be parsed before any script for it to apply to them.
  EXPECT_NE(page.dom.find("<head><meta http-equiv=\"Content-Security-Policy\""), std::string::npos);

  const json& counts = t["counts"];
  const TimelineLayout timeline = LayOutTimeline(input.schedules[0], input.op_alone_ms);
  EXPECT_EQ(counts.value("lanes", -1), std::max(timeline.rows, 1));
  EXPECT_EQ(counts.value("stage_boxes", -1), static_cast<int>(timeline.stages.size()));
  EXPECT_EQ(counts.value("timeline_ops", -1), static_cast<int>(timeline.ops.size()));
  EXPECT_EQ(counts.value("graph_ops", -1), input.graph.OperatorCount());
  const GraphLayout graph = LayOutGraph(input.graph);
  EXPECT_EQ(counts.value("edges", -1), static_cast<int>(graph.edges.size()));

  // The drawn shapes themselves, in the order the layout lists them.
  const std::string drawn_timeline = Slice(page.dom, "timeline", "</div>");
  EXPECT_EQ(Tags(drawn_timeline, "text", "data-lane=").size(),
            static_cast<size_t>(std::max(timeline.rows, 1)));
  const std::vector<std::string> stage_rects = Tags(drawn_timeline, "rect", "class=\"st");
  ASSERT_EQ(stage_rects.size(), timeline.stages.size()) << page.diag;
  double widest_ms = 0, px_per_ms = 0;
  for (size_t k = 0; k < stage_rects.size(); ++k) {
    const double ms = Number(stage_rects[k], "data-ms");
    EXPECT_NEAR(ms, timeline.stages[k].width_ms, 1e-5) << stage_rects[k];
    if (ms > widest_ms) {
      widest_ms = ms;
      px_per_ms = Number(stage_rects[k], "width") / ms;
    }
  }
  ASSERT_GT(widest_ms, 0) << "no stage box has a width";
  for (const std::string& rect : stage_rects) {
    EXPECT_NEAR(Number(rect, "width"), Number(rect, "data-ms") * px_per_ms, 1.0)
        << "a stage box's width is not proportional to its latency: " << rect;
  }
  const std::vector<std::string> op_rects = Tags(drawn_timeline, "rect", "class=\"op\"");
  ASSERT_EQ(op_rects.size(), timeline.ops.size());
  for (size_t i = 0; i < op_rects.size(); ++i) {
    EXPECT_EQ(Attr(op_rects[i], "data-i"), std::to_string(timeline.ops[i].nodes[0]));
  }
  // Widths as the browser laid them out (getBoundingClientRect), not only
  // as written: proportional within a pixel over the widest stage. (Not the
  // page's 4 px/ms floor: widths written to 0.01 px put a 0.05 ms box's
  // ratio a few percent either side of it.)
  const double min = t["px_per_ms"].value("min", 0.0), max = t["px_per_ms"].value("max", 0.0);
  EXPECT_GT(min, 0.0) << t.dump();
  EXPECT_LE((max - min) * widest_ms, 1.0) << t.dump();

  const std::string drawn_graph = Slice(page.dom, "graph", "</div>");
  std::set<NodeId> in_graph;
  for (const std::string& rect : Tags(drawn_graph, "rect", "data-i=")) {
    in_graph.insert(std::stoi(Attr(rect, "data-i").value_or("-1")));
  }
  EXPECT_EQ(in_graph.size(), static_cast<size_t>(input.graph.OperatorCount()));
  EXPECT_EQ(in_graph.empty() ? -1 : *in_graph.begin(), 1);
  EXPECT_EQ(in_graph.empty() ? -1 : *in_graph.rbegin(), input.graph.OperatorCount());
  const std::vector<std::string> edges = Tags(drawn_graph, "path", "class=\"edges\"");
  ASSERT_EQ(edges.size(), 1u);
  EXPECT_EQ(Attr(edges[0], "data-n"), std::to_string(graph.edges.size()));

  if (input.multi) {
    const TimelineLayout multi = LayOutMultiDevice(*input.multi, input.op_alone_ms);
    EXPECT_EQ(counts.value("multi_lanes", -1), multi.rows);
    EXPECT_EQ(counts.value("links", -1), static_cast<int>(input.multi->transfers.size()));
    const std::string drawn = Slice(page.dom, "multi", "</div>");
    EXPECT_EQ(Tags(drawn, "rect", "class=\"st").size(), multi.stages.size());
    EXPECT_EQ(Tags(drawn, "rect", "class=\"op\"").size(), multi.ops.size());
  }
  if (input.matrix) {
    size_t cells = 0;
    for (const auto& row : input.matrix->cells) cells += row.size();
    EXPECT_EQ(counts.value("matrix_cells", -1), static_cast<int>(cells));
  }
}

// A PNG starts with these 8 bytes (RFC 2083, 3.1).
void ExpectPng(const std::string& name, const std::string& view) {
  const fs::path png =
      fs::path(IOS_BINARY_DIR) / "report-screenshots" / (name + "-" + view + ".png");
  const std::string bytes = ios::testing::ReadFile(png);
  EXPECT_EQ(bytes.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8)) << png;
  EXPECT_GT(bytes.size(), 1000u) << png;
}

class ReportBrowserTest : public ::testing::Test {
 protected:
  ios::testing::TempDir dir_{"ios-report-browser"};
};

TEST_F(ReportBrowserTest, DrawsASearchReportsGraphComparisonAndPartsWithNoErrors) {
  IOS_REQUIRE_CHROMIUM();
  const ReportInput input = testing::SmallInput();
  // The timeline view is opened by the run and the large report's tests.
  for (const std::string view : {"graph", "compare", "search"}) {
    SCOPED_TRACE(view);
    const Page page = Open(dir_.path(), "search", input, view, true);
    ExpectDrawnAsLaidOut(input, page);
    ExpectShown(page, view);
    ExpectPng("search", view);
  }
}

TEST_F(ReportBrowserTest, OpensARunReportOnTheTimelineWhenNoViewIsNamed) {
  IOS_REQUIRE_CHROMIUM();
  // What ios-run writes: no search facts, so no search view.
  ReportInput input = testing::SmallInput();
  input.tool = "ios-run";
  input.search.reset();
  const Page page = Open(dir_.path(), "run", input, "", true);
  ExpectDrawnAsLaidOut(input, page);
  ExpectShown(page, "timeline");
  EXPECT_EQ(page.dom.find("id=\"v-search\""), std::string::npos);
  ExpectPng("run", "default");
}

TEST_F(ReportBrowserTest, DrawsEveryDeviceRowAndCopyOfAMultiDeviceSchedule) {
  IOS_REQUIRE_CHROMIUM();
  ReportInput input = testing::SmallInput();
  input.multi = testing::SmallMulti();
  const Page page = Open(dir_.path(), "multi", input, "multi", true);
  ExpectDrawnAsLaidOut(input, page);
  ExpectShown(page, "multi");
  ExpectPng("multi", "multi");
}

TEST_F(ReportBrowserTest, ShowsTheSpecializationMatrixAsAHeatMap) {
  IOS_REQUIRE_CHROMIUM();
  ReportInput input = testing::SmallInput();
  input.matrix = testing::SmallMatrix();
  const Page page = Open(dir_.path(), "matrix", input, "matrix", true);
  ExpectDrawnAsLaidOut(input, page);
  ExpectShown(page, "matrix");
  // Each column's best cell white (ratio 1.00), the others redder with
  // their penalty: SmallMatrix has no ties.
  const std::vector<std::string> cells = Tags(Slice(page.dom, "matrix-table", "</table>"), "td");
  EXPECT_EQ(cells.size(), 12u);
  EXPECT_EQ(std::count_if(cells.begin(), cells.end(),
                          [](const std::string& td) {
                            return Attr(td, "style") == "background:rgb(255,255,255)";
                          }),
            3);
  ExpectPng("matrix", "matrix");
}

TEST_F(ReportBrowserTest, DrawsEveryOperatorOfATwoThousandOperatorReport) {
  IOS_REQUIRE_CHROMIUM();
  const ReportInput input = testing::LargeInput(2000);
  // One launch (the hidden graph is drawn and checked too): this page
  // takes the longest to open.
  const Page page = Open(dir_.path(), "large", input, "timeline", true);
  ExpectDrawnAsLaidOut(input, page);
  ExpectShown(page, "timeline");
  ExpectPng("large", "timeline");
  // Recorded, not asserted (a timing on a shared machine is no test):
  // bench/report_render.sh measures the 2 s goal.
  if (page.selftest.is_object()) {
    RecordProperty("render_ms", std::to_string(page.selftest.value("render_ms", -1.0)));
  }
}

// The checks above can fail: a page that tries to fetch from the network
// and throws says so in its self-test. Both come after the page's script
// has written #selftest, as a late image or error would: the self-test
// must not be a snapshot taken before they arrive. (Chromium lists a fetch
// the CSP refused as a resource too, so `resources` catches it twice over.)
TEST_F(ReportBrowserTest, ItsSelfTestCatchesAFetchAndAScriptErrorAfterItsScriptRan) {
  IOS_REQUIRE_CHROMIUM();
  std::string html = RenderHtml(testing::SmallInput());
  const size_t body_end = html.rfind("</body>");
  ASSERT_NE(body_end, std::string::npos);
  html.insert(body_end, "<img src=\"http://192.0.2.1/x.png\"><script>notAFunction();</script>");
  const fs::path file = dir_.path() / "tampered.html";
  ASSERT_TRUE(ios::testing::WriteFile(file, html));
  const Page page = OpenFile(dir_.path(), file, "tampered", "", false);
  ASSERT_TRUE(page.selftest.is_object()) << page.diag;
  const std::string errors = page.selftest["errors"].dump();
  EXPECT_NE(errors.find("notAFunction"), std::string::npos) << errors;
  EXPECT_NE(errors.find("csp: img-src"), std::string::npos) << errors;
  EXPECT_NE(errors.find("cannot load http://192.0.2.1/x.png"), std::string::npos) << errors;
  EXPECT_EQ(page.selftest.value("resources", -1), 1) << page.selftest.dump();
}

}  // namespace
}  // namespace ios::report
