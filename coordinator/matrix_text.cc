// The specialization matrix as a person reads it (text) and as a program
// does (CSV, JSON). Every form is oriented alike: rows are the schedule
// optimised for, columns where it runs.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "coordinator/specialize.h"

namespace ios::coordinator {
namespace {

std::string Label(const MatrixSetting& s) {
  return "batch " + std::to_string(s.batch) + ", " + s.device;
}

std::string Fixed(double value, int decimals) {
  if (!std::isfinite(value)) return "";
  char text[48];
  std::snprintf(text, sizeof text, "%.*f", decimals, value);
  return text;
}

// A field quoted where it must be: device names carry commas
// ("cpu,threads=1").
std::string CsvField(const std::string& text) {
  if (text.find_first_of(",\"\n") == std::string::npos) return text;
  std::string quoted = "\"";
  for (const char c : text) {
    if (c == '"') quoted += '"';
    quoted += c;
  }
  return quoted + "\"";
}

nlohmann::json Number(double value) {
  return std::isfinite(value) ? nlohmann::json(value) : nlohmann::json(nullptr);
}

std::string Pad(const std::string& text, size_t width, bool right) {
  if (text.size() >= width) return text;
  const std::string fill(width - text.size(), ' ');
  return right ? fill + text : text + fill;
}

}  // namespace

std::string FormatMatrixText(const SpecializationMatrix& m) {
  const size_t n = m.settings.size();
  std::string text = "specialization matrix of " + m.model +
                     ": rows = the schedule optimised for, columns = where it runs;\n"
                     "each cell: its latency over the best of its column (* = the best) and its "
                     "ms.\n"
                     "(The IOS paper's Table 3 is the transpose: its rows are where it runs.)\n";
  if (m.AnySimulated()) {
    std::string simulated;
    for (const MatrixSetting& s : m.settings) {
      if (s.simulated && simulated.find(s.device) == std::string::npos) {
        simulated += (simulated.empty() ? "" : ", ") + s.device;
      }
    }
    text += "SIMULATED latencies on " + simulated +
            " (an analytical model, not a measurement): the diagonal is the best by "
            "construction there.\n";
  }
  // Cells and labels first, then every column as wide as its widest.
  std::vector<std::vector<std::string>> table(n + 1, std::vector<std::string>(n + 1));
  table[0][0] = "optimised for \\ run at";
  int predicted = 0, stored = 0, measured = 0, failed = 0;
  for (size_t j = 0; j < n; ++j) {
    table[0][j + 1] = Label(m.settings[j]);
    const int best = m.BestRow(j);
    for (size_t i = 0; i < n; ++i) {
      const MatrixCell& cell = m.cells[i][j];
      std::string& out = table[i + 1][j + 1];
      switch (cell.source) {
        case CellSource::kMeasuredNow:
          ++measured;
          break;
        case CellSource::kStored:
          ++stored;
          break;
        case CellSource::kPredicted:
          ++predicted;
          break;
        case CellSource::kFailed:
          ++failed;
          break;
      }
      if (cell.source == CellSource::kFailed) {
        out = "failed";
        continue;
      }
      out = Fixed(m.Normalised(i, j), 3) + (static_cast<int>(i) == best ? "* " : "  ") +
            Fixed(m.Figure(i, j), 3) + " ms" + (m.MeasuredColumn(j) ? "" : " (dp)");
    }
  }
  for (size_t i = 0; i < n; ++i) {
    table[i + 1][0] = Label(m.settings[i]) + " (" + m.returned.at(i) + ")";
  }
  std::vector<size_t> width(n + 1, 0);
  for (const auto& row : table) {
    for (size_t c = 0; c <= n; ++c) width[c] = std::max(width[c], row[c].size());
  }
  for (const auto& row : table) {
    std::string line;
    for (size_t c = 0; c <= n; ++c) line += (c ? "  " : "") + Pad(row[c], width[c], c > 0);
    text += line + "\n";
  }
  text += "cells: " + std::to_string(measured) + " run end to end now, " + std::to_string(stored) +
          " end-to-end figures from the DB, " + std::to_string(predicted) + " without one, " +
          std::to_string(failed) +
          " failed; (dp): a column with a cell without an end-to-end figure compares the DP's "
          "sums of stage latencies\n";
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = 0; j < n; ++j) {
      const MatrixCell& cell = m.cells[i][j];
      if (cell.error.empty()) continue;
      text +=
          "  " + Label(m.settings[i]) + " at " + Label(m.settings[j]) + ": " + cell.error + "\n";
    }
  }
  text +=
      "stages measured " + std::to_string(m.stages_measured) + ", end-to-end runs measured " +
      std::to_string(m.runs_measured) +
      (m.stages_measured == 0 && m.runs_measured == 0 ? " (everything came from the DB)\n" : "\n");
  return text;
}

std::string FormatMatrixCsv(const SpecializationMatrix& m) {
  std::string text =
      "optimised_batch,optimised_device,run_batch,run_device,predicted_ms,measured_ms,ratio,"
      "source\n";
  for (size_t i = 0; i < m.settings.size(); ++i) {
    for (size_t j = 0; j < m.settings.size(); ++j) {
      const MatrixCell& cell = m.cells[i][j];
      text += std::to_string(m.settings[i].batch) + "," + CsvField(m.settings[i].device) + "," +
              std::to_string(m.settings[j].batch) + "," + CsvField(m.settings[j].device) + "," +
              Fixed(cell.predicted_ms, 6) + "," + Fixed(cell.measured_ms, 6) + "," +
              Fixed(m.Normalised(i, j), 6) + "," + ToString(cell.source) + "\n";
    }
  }
  return text;
}

std::string FormatMatrixJson(const SpecializationMatrix& m) {
  using nlohmann::json;
  json settings = json::array(), cells = json::array(), normalised = json::array();
  for (size_t i = 0; i < m.settings.size(); ++i) {
    const MatrixSetting& s = m.settings[i];
    settings.push_back({{"batch", s.batch},
                        {"device", s.device},
                        {"simulated", s.simulated},
                        {"returned", m.returned.at(i)}});
    json row = json::array(), ratios = json::array();
    for (size_t j = 0; j < m.settings.size(); ++j) {
      const MatrixCell& cell = m.cells[i][j];
      json one = {{"predicted_ms", Number(cell.predicted_ms)},
                  {"measured_ms", Number(cell.measured_ms)},
                  {"source", ToString(cell.source)}};
      if (!cell.error.empty()) one["error"] = cell.error;
      row.push_back(std::move(one));
      ratios.push_back(Number(m.Normalised(i, j)));
    }
    cells.push_back(std::move(row));
    normalised.push_back(std::move(ratios));
  }
  const json document = {
      {"model", m.model},
      {"orientation",
       "rows: the schedule optimised for; columns: where it runs (the IOS paper's Table 3 is "
       "the transpose)"},
      {"settings", std::move(settings)},
      {"cells", std::move(cells)},
      {"normalised", std::move(normalised)},
      {"stages_measured", m.stages_measured},
      {"runs_measured", m.runs_measured}};
  // Names and worker messages may not be UTF-8: replaced, never thrown on.
  return document.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

}  // namespace ios::coordinator
