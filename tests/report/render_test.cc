#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <nlohmann/json.hpp>
#include <string>

#include "common/error.h"
#include "report/report.h"
#include "tests/report/sample_inputs.h"

namespace ios::report {
namespace {

using testing::SmallInput;

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// The text of the element <script type="application/json" id="ID">.
std::string JsonBlock(const std::string& page, const std::string& id) {
  const std::string open = "<script type=\"application/json\" id=\"" + id + "\">";
  const size_t begin = page.find(open);
  if (begin == std::string::npos) return "";
  const size_t end = page.find("</script>", begin);
  return page.substr(begin + open.size(), end - begin - open.size());
}

std::string ErrorOf(const ReportInput& input) {
  try {
    RenderHtml(input);
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(RenderTest, HostileNodeNamesCannotBreakOutOfTheirElements) {
  const std::string page = RenderHtml(SmallInput());
  // The error guard, the data and the main script: no name opened or closed another.
  EXPECT_EQ(Count(page, "<script"), 3u);
  EXPECT_EQ(Count(page, "</script"), 3u);
  EXPECT_EQ(Count(page, "alert(1)</"), 0u);
  EXPECT_EQ(Count(page, "<!--"), 0u);
  // The title went through the HTML escape.
  EXPECT_NE(page.find("<title>small &lt;/script&gt; report</title>"), std::string::npos);
  EXPECT_NE(page.find("a note &amp; &lt;i&gt;more&lt;/i&gt;"), std::string::npos);
  // The blob still carries the names exactly, for the script to show as text.
  const std::string blob = JsonBlock(page, "data");
  EXPECT_EQ(blob.find_first_of("<>&"), std::string::npos);
  const auto data = nlohmann::json::parse(blob);
  for (size_t i = 0; i < testing::HostileNames().size(); ++i) {
    EXPECT_EQ(data["ops"][i + 1][0], testing::HostileNames()[i]);
  }
}

TEST(RenderTest, PageNamesNoNetworkAddress) {
  std::string page = RenderHtml(SmallInput());
  // The one allowed occurrence: the CSP meta element's attribute name.
  const std::string csp = "<meta http-equiv=\"Content-Security-Policy\"";
  ASSERT_EQ(Count(page, csp), 1u);
  page.erase(page.find(csp), csp.size());
  std::transform(page.begin(), page.end(), page.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  EXPECT_EQ(page.find("http"), std::string::npos);
  EXPECT_EQ(page.find("src="), std::string::npos);
  EXPECT_EQ(page.find("href="), std::string::npos);
  EXPECT_EQ(page.find("url(" + std::string("\"")), std::string::npos);
}

TEST(RenderTest, ContentSecurityPolicyComesFirstInTheHead) {
  const std::string page = RenderHtml(SmallInput());
  const size_t csp =
      page.find("<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none';");
  ASSERT_NE(csp, std::string::npos);
  EXPECT_EQ(csp, page.find("<head>") + 6);
  EXPECT_LT(csp, page.find("<script"));
  EXPECT_LT(csp, page.find("<style"));
}

TEST(RenderTest, SaysWhenTheDeviceIsSimulated) {
  ReportInput in = SmallInput();
  EXPECT_NE(RenderHtml(in).find("id=\"simulated\""), std::string::npos);
  in.device.simulated = false;
  EXPECT_EQ(RenderHtml(in).find("id=\"simulated\""), std::string::npos);
}

TEST(RenderTest, WritesTheTablesAsPlainHtml) {
  ReportInput in = SmallInput();
  in.multi = testing::SmallMulti();
  in.matrix = testing::SmallMatrix();
  const std::string page = RenderHtml(in);
  for (const char* id : {"v-timeline", "v-graph", "v-compare", "v-search", "v-multi", "v-matrix",
                         "compare-table", "parts-table", "facts-table", "matrix-table"}) {
    EXPECT_NE(page.find(std::string("id=\"") + id + "\""), std::string::npos) << id;
  }
  EXPECT_NE(page.find("<td>ios (returned)</td><td>0.750</td><td>0.800 &plusmn; 0.020"),
            std::string::npos);
  EXPECT_NE(page.find("<td>1.40&times;</td>"), std::string::npos);  // 1.05 / 0.75
  EXPECT_NE(page.find("<th>skipped by the lazy bounds (never measured)</th><td>3</td>"),
            std::string::npos);
  // Twelve cells; the diagonal is marked, white at ratio 1, red at >= 1.2.
  EXPECT_EQ(Count(page, "<td data-r="), 12u);
  EXPECT_NE(page.find("style=\"background:rgb(255,255,255)\""), std::string::npos);
  EXPECT_NE(page.find("1.000*</td>"), std::string::npos);
  EXPECT_NE(page.find("reference &lt;bs1&gt;.json"), std::string::npos);
}

TEST(RenderTest, LeavesOutViewsWithoutData) {
  const std::string page = RenderHtml(SmallInput());
  EXPECT_EQ(page.find("id=\"v-matrix\""), std::string::npos);
  EXPECT_EQ(page.find("id=\"v-multi\""), std::string::npos);
}

TEST(RenderTest, RefusesAnInconsistentInputNamingTheField) {
  ReportInput in = SmallInput();
  in.schedules[1].stages[2].groups[0][0] = 99;
  EXPECT_NE(ErrorOf(in).find("schedules[1] (sequential).stages[2].groups[0][0]: node 99 is not an "
                             "operator of graph small<model> (1..6)"),
            std::string::npos)
      << ErrorOf(in);
  in = SmallInput();
  in.schedules[0].stages[1].groups[0][0] = 1;
  EXPECT_NE(ErrorOf(in).find("schedules[0] (ios).stages[1].groups[0][0]: operator "),
            std::string::npos)
      << ErrorOf(in);
  in = SmallInput();
  in.schedules[0].stages.pop_back();
  EXPECT_NE(ErrorOf(in).find("schedules[0] (ios): operator f (node 6) is in no stage"),
            std::string::npos)
      << ErrorOf(in);
  in = SmallInput();
  in.schedules[0].stages[0].groups[0][0] = 0;  // the input is no operator
  EXPECT_NE(ErrorOf(in).find("node 0 is not an operator"), std::string::npos);
  in = SmallInput();
  in.schedules[0].stages[3].block = 2;
  EXPECT_NE(ErrorOf(in).find("stages[3].block: 2 is not a block"), std::string::npos);
  in = SmallInput();
  in.op_alone_ms.pop_back();
  EXPECT_NE(ErrorOf(in).find("op_alone_ms: 6 entries, expected 0 or one per node (7)"),
            std::string::npos);
  in = SmallInput();
  in.schedules[1].returned = true;
  EXPECT_NE(ErrorOf(in).find("schedules: 2 marked returned"), std::string::npos);
  in = SmallInput();
  in.matrix = testing::SmallMatrix();
  in.matrix->cells[2].pop_back();
  EXPECT_NE(ErrorOf(in).find("matrix.cells[2]: 2 cells, expected one per setting (3)"),
            std::string::npos);
  in.matrix->cells.pop_back();
  EXPECT_NE(ErrorOf(in).find("matrix.cells: 3 rows"), std::string::npos);
  in = SmallInput();
  in.multi = testing::SmallMulti();
  in.multi->transfers[0].to = 2;
  EXPECT_NE(ErrorOf(in).find("multi.transfers[0]: devices 1 -> 2, expected 0..1"),
            std::string::npos);
  in.multi = testing::SmallMulti();
  in.multi->devices[1].stages.pop_back();
  EXPECT_NE(ErrorOf(in).find("multi.devices: operator f (node 6) is in no stage"),
            std::string::npos);
  in = SmallInput();
  in.graph = Graph{};
  EXPECT_NE(ErrorOf(in).find("graph: empty"), std::string::npos);
}

TEST(RenderTest, ATwoThousandOperatorReportStaysUnderFiveMegabytes) {
  const ReportInput in = testing::LargeInput(2000);
  const std::string page = RenderHtml(in);
  EXPECT_LT(page.size(), size_t{5} << 20);
  const auto data = nlohmann::json::parse(JsonBlock(page, "data"));
  EXPECT_EQ(data["ops"].size(), 2001u);
  EXPECT_EQ(data["schedules"][1]["tl"]["ops"].size(), 2000u);
  EXPECT_EQ(page, RenderHtml(in));  // deterministic
}

TEST(RenderTest, AReportOnlyNeedsAGraphAndSchedules) {
  ReportInput in;
  in.graph = testing::SmallGraph();
  ScheduleRow seq{"sequential", {}, kNoFigure, std::nullopt, -1, false};
  for (NodeId v = 1; v <= 6; ++v) {
    StageRow stage;
    stage.groups = {{v}};
    stage.block = v == 6 ? 1 : 0;
    seq.stages.push_back(stage);
  }
  in.schedules = {seq};
  const std::string page = RenderHtml(in);
  EXPECT_NE(page.find("id=\"compare-table\""), std::string::npos);
  EXPECT_EQ(page.find("id=\"v-search\""), std::string::npos);
}

// data["schedules"][s]["rows"][r]: [label, mixed 0|1, tip].
nlohmann::json RowNames(const ReportInput& in, size_t schedule) {
  return nlohmann::json::parse(JsonBlock(RenderHtml(in), "data"))["schedules"][schedule]["rows"];
}

TEST(RenderTest, NamesTimelineRowsAfterTheDevicesLanes) {
  ReportInput in = SmallInput();
  // The ios schedule runs everything on one lane, and every sim lane 0 is
  // "modelled stream 0": one name, not mixed.
  nlohmann::json rows = RowNames(in, 0);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0][0], "modelled stream 0");
  EXPECT_EQ(rows[0][1], 0);
  // cuda: a lone lane is stream 0, lane 0 of three is stream 1. The greedy
  // schedule has one 3-lane stage and three 1-lane stages.
  in.lanes.kind = "cuda";
  in.lanes.by_count = {{1, {"stream 0 (main)"}}, {3, {"stream 1", "stream 2", "stream 3"}}};
  rows = RowNames(in, 2);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0][0], "stream 0 (main)");  // most of row 0's stages
  EXPECT_EQ(rows[0][1], 1);
  EXPECT_NE(rows[0][2].get<std::string>().find("stream 0 (main): 3 stages"), std::string::npos)
      << rows[0][2];
  EXPECT_NE(rows[0][2].get<std::string>().find("stream 1: 1 stage"), std::string::npos)
      << rows[0][2];
  EXPECT_EQ(rows[1][0], "stream 2");
  EXPECT_EQ(rows[1][1], 0);
  EXPECT_EQ(rows[2][0], "stream 3");
  // A lane count the producer gave no names for falls back to "lane l".
  in.lanes.by_count.erase(3);
  rows = RowNames(in, 2);
  EXPECT_EQ(rows[1][0], "lane 1");
}

TEST(RenderTest, ItsErrorGuardNamesAResourceThatFailedToLoad) {
  // Such an error event has no message: "error: undefined" said nothing.
  const std::string page = RenderHtml(SmallInput());
  EXPECT_NE(page.find("'cannot load '+u"), std::string::npos);
}

TEST(RenderTest, HeaderLeavesNoDanglingSeparatorForEmptyFields) {
  ReportInput in = SmallInput();
  in.version.clear();
  in.generated_at.clear();
  std::string page = RenderHtml(in);
  EXPECT_NE(page.find("6 operators &middot; test</p>"), std::string::npos);
  in.tool.clear();
  page = RenderHtml(in);
  EXPECT_NE(page.find("6 operators</p>"), std::string::npos);
  EXPECT_EQ(page.find("&middot; </p>"), std::string::npos);
  EXPECT_EQ(page.find("&middot;  &middot;"), std::string::npos);
}

TEST(RenderTest, WritesSmallPeaksInKibibytes) {
  ReportInput in = SmallInput();
  in.schedules[1].peak_bytes = 100;
  in.schedules[2].peak_bytes = 3 << 20;
  const std::string page = RenderHtml(in);
  EXPECT_NE(page.find("<td>4.0 KiB</td>"), std::string::npos);  // ios: 4096 bytes
  EXPECT_NE(page.find("<td>100 B</td>"), std::string::npos);
  EXPECT_NE(page.find("<td>3.00 MiB</td>"), std::string::npos);
}

TEST(RenderTest, MarksAMatrixCellThatIsADpSumAmongMeasuredCells) {
  ReportInput in = SmallInput();
  in.matrix = testing::SmallMatrix();  // cell [1][2] was not run end to end
  std::string page = RenderHtml(in);
  EXPECT_EQ(Count(page, "class=\"dpsum\""), 1u);
  EXPECT_NE(page.find("<td data-r=\"1\" data-c=\"2\" class=\"dpsum\""), std::string::npos);
  EXPECT_EQ(Count(page, "&dagger;"), 2u);  // the cell and its legend line
  // Nothing measured: every cell is a DP sum, comparable with the others.
  for (auto& row : in.matrix->cells) {
    for (MatrixCell& cell : row) cell.measured_ms = kNoFigure;
  }
  page = RenderHtml(in);
  EXPECT_EQ(Count(page, "&dagger;"), 0u);
}

}  // namespace
}  // namespace ios::report
