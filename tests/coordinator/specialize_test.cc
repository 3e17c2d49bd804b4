// The specialization matrix (coordinator/specialize.h) and the pricing of a
// given schedule it shares with --evaluate and ios-run (coordinator/
// pricing.h), on simulated devices: exact, so the diagonal is the best of
// its column and a second run has nothing left to measure.
#include "coordinator/specialize.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/zoo.h"
#include "coordinator/measurer.h"
#include "coordinator/pricing.h"
#include "coordinator/report_input.h"
#include "db/profile_store.h"
#include "devices/sim/sim_backend.h"
#include "report/report.h"

namespace ios::coordinator {
namespace {

// A simulated GPU that counts what it is asked to measure: stages and
// whole networks.
class CountingSim final : public OneAtATimeMeasurer {
 public:
  explicit CountingSim(const std::string& gpu) : backend_(devices::CreateSimBackend(gpu)) {}
  const DeviceInfo& Device() const override { return backend_->Device(); }
  int64_t stages = 0, networks = 0;

 protected:
  MeasureResult MeasureOne(const StageSpec& spec, int batch_size,
                           const MeasureSettings& settings) override {
    ++stages;
    return backend_->Measure(spec, batch_size, settings);
  }
  MeasureResult MeasureNetworkOne(const NetworkSpec& network, int batch_size,
                                  const MeasureSettings& settings) override {
    ++networks;
    return backend_->MeasureNetwork(network, batch_size, settings);
  }

 private:
  std::unique_ptr<devices::Backend> backend_;
};

SpecializeDevice SimDevice(const std::string& name, CountingSim& sim) {
  return {name, &sim, DefaultMeasureSettings(DeviceTiming::kModelled),
          DefaultVerifySettings(DeviceTiming::kModelled)};
}

struct MatrixRun {
  SpecializationMatrix matrix;
  int64_t stages = 0, networks = 0;  // what the devices were asked
};

MatrixRun Specialize(const Graph& graph, db::ProfileStore& store) {
  CountingSim v100("v100"), k80("k80");
  MatrixRun run;
  run.matrix = RunSpecialization(graph, graph.name, {1, 8},
                                 {SimDevice("sim:v100", v100), SimDevice("sim:k80", k80)},
                                 SearchOptions{}, store);
  run.stages = v100.stages + k80.stages;
  run.networks = v100.networks + k80.networks;
  return run;
}

// One first run for the suite, on an empty DB (a search per setting).
class SpecializeTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    graph_ = std::make_unique<Graph>(BuildZooModel("squeezenet"));
    store_ = db::ProfileStore::Open(":memory:");
    first_ = std::make_unique<MatrixRun>(Specialize(*graph_, *store_));
  }
  static void TearDownTestSuite() {
    first_.reset();
    store_.reset();
    graph_.reset();
  }
  static inline std::unique_ptr<Graph> graph_;
  static inline std::unique_ptr<db::ProfileStore> store_;
  static inline std::unique_ptr<MatrixRun> first_;
};

TEST_F(SpecializeTest, HasEverySettingAsRowAndColumnDeviceByDevice) {
  const SpecializationMatrix& m = first_->matrix;
  ASSERT_EQ(m.settings.size(), 4u);
  EXPECT_EQ(m.settings[0].batch, 1);
  EXPECT_EQ(m.settings[0].device, "sim:v100");
  EXPECT_EQ(m.settings[1].batch, 8);
  EXPECT_EQ(m.settings[1].device, "sim:v100");
  EXPECT_EQ(m.settings[2].device, "sim:k80");
  EXPECT_EQ(m.settings[3].batch, 8);
  EXPECT_TRUE(m.AnySimulated());
  ASSERT_EQ(m.cells.size(), 4u);
  ASSERT_EQ(m.returned.size(), 4u);
  for (const auto& row : m.cells) ASSERT_EQ(row.size(), 4u);
}

// The simulator runs a network as the sum of its stages and the DP is
// exact per part, so no schedule beats the one searched for the column's
// own setting there.
TEST_F(SpecializeTest, TheDiagonalIsTheBestOfItsColumnOnTheSimulator) {
  const SpecializationMatrix& m = first_->matrix;
  for (size_t j = 0; j < m.settings.size(); ++j) {
    const double own = m.Figure(j, j);
    ASSERT_TRUE(std::isfinite(own)) << "column " << j;
    for (size_t i = 0; i < m.settings.size(); ++i) {
      EXPECT_LE(own, m.Figure(i, j) * (1 + 1e-9)) << "row " << i << " column " << j;
      EXPECT_GE(m.Normalised(i, j), 1 - 1e-9);
    }
    EXPECT_NEAR(m.Normalised(j, j), 1.0, 1e-9);
  }
  // Not every schedule is the same one: the matrix says something.
  bool differs = false;
  for (size_t i = 0; i < m.settings.size(); ++i) {
    for (size_t j = 0; j < m.settings.size(); ++j) differs |= m.Normalised(i, j) > 1 + 1e-6;
  }
  EXPECT_TRUE(differs) << "every schedule ties everywhere: squeezenet no longer specializes";
}

TEST_F(SpecializeTest, EveryCellIsRunEndToEndAndOnTheSimulatorMeasuresItsPrediction) {
  const SpecializationMatrix& m = first_->matrix;
  for (size_t i = 0; i < m.settings.size(); ++i) {
    for (size_t j = 0; j < m.settings.size(); ++j) {
      const MatrixCell& cell = m.cells[i][j];
      EXPECT_TRUE(cell.source == CellSource::kMeasuredNow || cell.source == CellSource::kStored)
          << ToString(cell.source) << " " << cell.error;
      EXPECT_NEAR(cell.measured_ms, cell.predicted_ms, 1e-9 * cell.predicted_ms);
    }
    // The search verified its own schedule: the diagonal's figure is that one.
    EXPECT_EQ(m.cells[i][i].source, CellSource::kStored);
  }
}

TEST_F(SpecializeTest, CountsWhatItMeasuredAndASecondRunMeasuresNothing) {
  EXPECT_GT(first_->matrix.stages_measured, 0);
  EXPECT_EQ(first_->matrix.stages_measured, first_->stages);
  EXPECT_GT(first_->matrix.runs_measured, 0);
  EXPECT_EQ(first_->matrix.runs_measured, first_->networks);

  const MatrixRun second = Specialize(*graph_, *store_);
  EXPECT_EQ(second.matrix.stages_measured, 0);
  EXPECT_EQ(second.matrix.runs_measured, 0);
  EXPECT_EQ(second.stages, 0);
  EXPECT_EQ(second.networks, 0);
  ASSERT_EQ(second.matrix.cells.size(), first_->matrix.cells.size());
  for (size_t i = 0; i < second.matrix.cells.size(); ++i) {
    for (size_t j = 0; j < second.matrix.cells.size(); ++j) {
      EXPECT_EQ(second.matrix.cells[i][j].source, CellSource::kStored);
      EXPECT_DOUBLE_EQ(second.matrix.Figure(i, j), first_->matrix.Figure(i, j));
    }
  }
}

TEST_F(SpecializeTest, CsvHasOneRowPerCellAndJsonTheWholeMatrix) {
  const SpecializationMatrix& m = first_->matrix;
  std::istringstream csv(FormatMatrixCsv(m));
  std::string line;
  ASSERT_TRUE(std::getline(csv, line));
  EXPECT_EQ(line,
            "optimised_batch,optimised_device,run_batch,run_device,predicted_ms,measured_ms,ratio,"
            "source");
  int rows = 0;
  while (std::getline(csv, line)) {
    ++rows;
    EXPECT_EQ(std::count(line.begin(), line.end(), ','), 7) << line;
  }
  EXPECT_EQ(rows, 16);

  const std::string text = FormatMatrixJson(m);
  ASSERT_TRUE(nlohmann::json::accept(text)) << text;
  const nlohmann::json doc = nlohmann::json::parse(text);
  EXPECT_EQ(doc["settings"].size(), 4u);
  EXPECT_EQ(doc["cells"].size(), 4u);
  EXPECT_EQ(doc["cells"][0].size(), 4u);
  EXPECT_EQ(doc["normalised"][2].size(), 4u);
  EXPECT_EQ(doc["stages_measured"], m.stages_measured);
  EXPECT_EQ(doc["runs_measured"], m.runs_measured);
}

TEST_F(SpecializeTest, TextMarksTheBestOfEachColumnAndSaysItIsSimulated) {
  const std::string text = FormatMatrixText(first_->matrix);
  EXPECT_NE(text.find("SIMULATED latencies on sim:v100, sim:k80"), std::string::npos) << text;
  EXPECT_NE(text.find("Table 3 is the transpose"), std::string::npos) << text;
  EXPECT_NE(text.find("batch 8, sim:k80 (" + first_->matrix.returned[3] + ")"), std::string::npos)
      << text;
  EXPECT_GE(std::count(text.begin(), text.end(), '*'), 4) << text;
}

TEST_F(SpecializeTest, ItsReportDrawsEachScheduleAtItsOwnSettingBesideTheMatrix) {
  const SpecializationMatrix& m = first_->matrix;
  const report::ReportInput input = ReportOfSpecialization(*graph_, m, nullptr);
  ASSERT_EQ(input.schedules.size(), 4u);
  for (size_t i = 0; i < 4; ++i) {
    const report::ScheduleRow& row = input.schedules[i];
    EXPECT_EQ(row.returned, i == 0) << row.name;
    // The diagonal's pricing: its own setting's figures.
    EXPECT_DOUBLE_EQ(row.predicted_ms, m.cells[i][i].predicted_ms) << row.name;
    ASSERT_TRUE(row.measured.has_value()) << row.name;
    EXPECT_DOUBLE_EQ(row.measured->median_ms, m.cells[i][i].measured_ms) << row.name;
    EXPECT_GT(row.peak_bytes, 0) << row.name;
  }
  EXPECT_EQ(input.schedules[3].name, "optimised for batch 8 on sim:k80");
  EXPECT_EQ(input.device.name, m.devices[0].name);
  EXPECT_TRUE(input.device.simulated);
  ASSERT_TRUE(input.matrix.has_value());
  for (size_t i = 0; i < 4; ++i) {
    for (size_t j = 0; j < 4; ++j) {
      EXPECT_NEAR(report::Normalised(*input.matrix, i, j), m.Normalised(i, j), 1e-12);
    }
  }
  std::string notes;
  for (const std::string& note : input.notes) notes += note + "\n";
  EXPECT_NE(notes.find("Table 3 is the transpose"), std::string::npos) << notes;
  EXPECT_NE(notes.find("sim:v100"), std::string::npos) << notes;
  EXPECT_NE(notes.find("sim:k80"), std::string::npos) << notes;

  // Every schedule covers every operator once: the page draws.
  const std::string page = report::RenderHtml(input);
  EXPECT_NE(page.find("id=\"matrix-table\""), std::string::npos);
  const std::string text = report::ToJson(input);
  ASSERT_TRUE(nlohmann::json::accept(text));
  const nlohmann::json doc = nlohmann::json::parse(text);
  ASSERT_TRUE(doc.contains("matrix"));
  size_t cells = 0;
  for (const auto& row : doc["matrix"]["cells"]) cells += row.size();
  EXPECT_EQ(cells, 16u);
}

// A column whose run failed compares DP sums (SpecializationMatrix::Figure):
// the heat map must rank it the same way, not mix in measured figures.
TEST_F(SpecializeTest, ItsReportComparesAColumnWithAFailedRunByDpSumsAsTheTextDoes) {
  SpecializationMatrix m = first_->matrix;
  m.cells[1][0].measured_ms = NAN;
  m.cells[1][0].source = CellSource::kPredicted;
  m.cells[1][0].error = "unsupported: no networks";
  m.cells[0][0].measured_ms = m.cells[0][0].predicted_ms * 10;  // ignored: DP sums compared
  const report::ReportInput input = ReportOfSpecialization(*graph_, m, nullptr);
  ASSERT_TRUE(input.matrix.has_value());
  EXPECT_TRUE(std::isnan(input.matrix->cells[0][0].measured_ms));
  EXPECT_NE(input.matrix->cells[0][0].source.find("not compared"), std::string::npos);
  EXPECT_NE(input.matrix->cells[1][0].source.find("no networks"), std::string::npos);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_NEAR(report::Normalised(*input.matrix, i, 0), m.Normalised(i, 0), 1e-12) << i;
  }
}

TEST(SpecializationMatrixTest, ItsReportRefusesAMatrixWithoutItsSchedules) {
  const Graph graph = BuildZooModel("squeezenet");
  SpecializationMatrix m;
  m.model = "squeezenet";
  m.settings = {{1, "sim:v100", true}};
  m.returned = {"ios"};
  m.cells.assign(1, std::vector<MatrixCell>(1));
  EXPECT_THROW(ReportOfSpecialization(graph, m, nullptr), Error);
}

TEST(SpecializationMatrixTest, NormalisesToTheColumnsBestAndSkipsCellsWithoutAFigure) {
  SpecializationMatrix m;
  m.settings = {{1, "cpu,threads=1", false}, {2, "cpu,threads=1", false}};
  m.returned = {"ios", "greedy"};
  m.cells.assign(2, std::vector<MatrixCell>(2));
  m.cells[0][0] = {2.0, 4.0, CellSource::kMeasuredNow, ""};
  m.cells[1][0] = {5.0, NAN, CellSource::kPredicted, "unsupported: no networks"};
  m.cells[0][1] = {NAN, NAN, CellSource::kFailed, "out of memory"};
  m.cells[1][1] = {3.0, 6.0, CellSource::kStored, ""};
  // A cell without an end-to-end figure: the column compares DP sums.
  EXPECT_FALSE(m.MeasuredColumn(0));
  EXPECT_EQ(m.BestRow(0), 0);
  EXPECT_DOUBLE_EQ(m.Normalised(1, 0), 2.5);
  // The failed cell has no figure; the other is measured.
  EXPECT_TRUE(m.MeasuredColumn(1));
  EXPECT_EQ(m.BestRow(1), 1);
  EXPECT_DOUBLE_EQ(m.Figure(1, 1), 6.0);
  EXPECT_TRUE(std::isnan(m.Normalised(0, 1)));
  EXPECT_FALSE(m.AnySimulated());
  // The device's comma is quoted, a missing figure is an empty field.
  EXPECT_NE(FormatMatrixCsv(m).find("1,\"cpu,threads=1\",2,\"cpu,threads=1\",,,,failed\n"),
            std::string::npos)
      << FormatMatrixCsv(m);
  const std::string text = FormatMatrixText(m);
  EXPECT_EQ(text.find("SIMULATED"), std::string::npos) << text;
  EXPECT_NE(text.find("2.500  5.000 ms (dp)"), std::string::npos) << text;
  EXPECT_NE(text.find("1.000* 6.000 ms\n"), std::string::npos) << text;
  EXPECT_NE(text.find("out of memory"), std::string::npos) << text;
  EXPECT_TRUE(nlohmann::json::accept(FormatMatrixJson(m)));
}

TEST(SpecializationMatrixTest, RefusesNoSettingsAndRepeatedOnes) {
  const Graph graph = BuildZooModel("squeezenet");
  auto store = db::ProfileStore::Open(":memory:");
  CountingSim sim("v100");
  const SpecializeDevice device = SimDevice("sim:v100", sim);
  EXPECT_THROW(RunSpecialization(graph, "squeezenet", {}, {device}, {}, *store), Error);
  EXPECT_THROW(RunSpecialization(graph, "squeezenet", {1, 1}, {device}, {}, *store), Error);
  EXPECT_THROW(RunSpecialization(graph, "squeezenet", {1}, {device, device}, {}, *store), Error);
  EXPECT_EQ(sim.stages, 0);
}

TEST(PriceBlocksTest, PricesASearchedScheduleAsTheSearchDidAndMeasuresOnlyWhatIsMissing) {
  const Graph graph = BuildZooModel("squeezenet");
  auto store = db::ProfileStore::Open(":memory:");
  CountingSim sim("v100");
  SearchOptions options;
  options.verify.enabled = false;
  const SearchOutcome searched = RunSearch(graph, "squeezenet", options, *store, sim);
  const int64_t asked = sim.stages;
  const PricedSchedule again =
      PriceBlocks(graph, BlockStagesOf(searched.ios), options, *store, sim);
  EXPECT_EQ(sim.stages, asked);
  EXPECT_EQ(again.table.stats.measured, 0);
  EXPECT_EQ(again.table.stats.reused, static_cast<int64_t>(again.distinct_stages));
  EXPECT_DOUBLE_EQ(again.schedule.latency_ms, searched.ios.latency_ms);
  ASSERT_EQ(again.schedule.blocks.size(), searched.ios.blocks.size());

  // At another batch size every distinct stage is measured, once.
  options.batch_size = 4;
  const PricedSchedule other =
      PriceBlocks(graph, BlockStagesOf(searched.ios), options, *store, sim);
  EXPECT_EQ(other.table.stats.measured, static_cast<int64_t>(other.distinct_stages));
  EXPECT_EQ(sim.stages, asked + other.table.stats.measured);
  EXPECT_GT(other.schedule.latency_ms, searched.ios.latency_ms);
}

}  // namespace
}  // namespace ios::coordinator
