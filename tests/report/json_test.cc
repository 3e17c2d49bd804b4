#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "common/error.h"
#include "common/ios_json.h"
#include "report/report.h"
#include "tests/report/sample_inputs.h"

namespace ios::report {
namespace {

using testing::SmallInput;

std::string ErrorOf(const std::string& text) {
  try {
    FromJson(text, "r.json");
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(ReportJsonTest, RoundTripsEveryField) {
  ReportInput in = SmallInput();
  in.multi = testing::SmallMulti();
  in.matrix = testing::SmallMatrix();
  const std::string text = ToJson(in);
  const ReportInput back = FromJson(text, "r.json");
  // Writing the read value again gives the same text: nothing was lost.
  EXPECT_EQ(ToJson(back), text);
  EXPECT_TRUE(StructurallyEqual(back.graph, in.graph));
  EXPECT_EQ(back.graph.node(1).name, in.graph.node(1).name);
  EXPECT_TRUE(std::isnan(back.schedules[2].stages[1].latency_ms));
  EXPECT_EQ(back.schedules[2].stages[1].source, Source::kSkipped);
  EXPECT_EQ(back.schedules[0].stages[0].strategy, Strategy::kMerge);
  ASSERT_TRUE(back.matrix.has_value());
  EXPECT_TRUE(std::isnan(back.matrix->cells[1][2].measured_ms));
  EXPECT_EQ(back.lanes.by_count.at(2)[1], "modelled stream 1");
  ASSERT_TRUE(back.schedules[0].measured.has_value());
  EXPECT_DOUBLE_EQ(back.schedules[0].measured->median_ms, 0.8);
}

TEST(ReportJsonTest, LeavesTheGraphOutWhenAsked) {
  const ReportInput back = FromJson(ToJson(SmallInput(), false), "r.json");
  EXPECT_TRUE(back.graph.nodes.empty());
  EXPECT_EQ(back.schedules.size(), 3u);
}

TEST(ReportJsonTest, ErrorsNameTheSourceAndTheField) {
  const std::string good = ToJson(SmallInput(), false);
  std::string bad = good;
  bad.replace(bad.find("\"latency_ms\":0.25"), 17, "\"latency_ms\":\"x\"");
  EXPECT_NE(ErrorOf(bad).find("r.json: schedules[0].stages[0].latency_ms: expected a number"),
            std::string::npos)
      << ErrorOf(bad);
  bad = good;
  bad.replace(bad.find("\"source\":\"stored\""), 17, "\"source\":\"guess\"");
  EXPECT_NE(ErrorOf(bad).find("schedules[0].stages[0].source: unknown source \"guess\""),
            std::string::npos)
      << ErrorOf(bad);
  EXPECT_NE(ErrorOf("{\"format\":\"other\"}").find("r.json: format: expected"), std::string::npos);
  EXPECT_NE(ErrorOf("[1,").find("r.json: not JSON"), std::string::npos);
  EXPECT_NE(ErrorOf(R"({"format":"ios-farm-report/v1","schedules":{}})")
                .find("schedules: expected an array"),
            std::string::npos);
  EXPECT_NE(
      ErrorOf(R"({"format":"ios-farm-report/v1","schedules":[{"stages":[{"groups":[["a"]]}]}]})")
          .find("schedules[0].stages[0].groups: expected an array of arrays of node ids"),
      std::string::npos);
}

TEST(ReportJsonTest, NormalisesEachColumnToItsBest) {
  const MatrixView m = testing::SmallMatrix();
  EXPECT_DOUBLE_EQ(Normalised(m, 0, 0), 1.0);
  EXPECT_NEAR(Normalised(m, 1, 0), 1.15, 1e-12);
  // Row 1 column 2 has no measurement: its predicted 3.3 stands in; the
  // column's best is row 2's measured 2.9 * 1.02.
  EXPECT_DOUBLE_EQ(Normalised(m, 2, 2), 1.0);
  EXPECT_NEAR(Normalised(m, 1, 2), 3.3 / (2.9 * 1.02), 1e-12);
  MatrixView empty = m;
  for (auto& row : empty.cells) row[1] = MatrixCell{};
  EXPECT_TRUE(std::isnan(Normalised(empty, 0, 1)));
  EXPECT_THROW(Normalised(m, 9, 0), std::out_of_range);
}

}  // namespace
}  // namespace ios::report
