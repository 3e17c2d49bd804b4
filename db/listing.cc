#include "db/listing.h"

#include <algorithm>
#include <cstdio>
#include <iostream>

#include "common/printable.h"

namespace ios::db {
namespace {

constexpr size_t kMaxTableCell = 60;

std::string FixedNumber(double value) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.4f", value);
  return buffer;
}

std::string CellText(const json& value, const Column& column, Format format) {
  switch (value.type()) {
    case json::value_t::null:
      return format == Format::kTable ? "-" : "";
    case json::value_t::string:
      // Model names, stage descriptions, device names and error messages
      // come from model files and workers: a table shows them escaped (a
      // newline or an escape sequence would forge rows or drive the
      // terminal). CSV quotes them and JSON escapes them, both exactly.
      return format == Format::kTable ? ios::Printable(value.get<std::string>())
                                      : value.get<std::string>();
    case json::value_t::boolean:
      if (format == Format::kTable)
        return value.get<bool>() ? column.table_true : column.table_false;
      return value.get<bool>() ? "true" : "false";
    case json::value_t::number_float:
      // Tables round; CSV keeps the shortest text that reads back exactly.
      return format == Format::kTable ? FixedNumber(value.get<double>()) : value.dump();
    default:
      return value.dump();
  }
}

std::string Abbreviate(const std::string& text) {
  if (text.size() <= kMaxTableCell) return text;
  return text.substr(0, kMaxTableCell - 3) + "...";
}

void PrintTable(const Listing& listing, std::ostream& out) {
  std::vector<size_t> shown;
  for (size_t c = 0; c < listing.columns.size(); ++c) {
    if (listing.columns[c].in_table) shown.push_back(c);
  }
  if (listing.vertical_table && listing.rows.size() == 1) {
    size_t width = 0;
    for (size_t c : shown) width = std::max(width, listing.columns[c].name.size());
    for (size_t c : shown) {
      const std::string& name = listing.columns[c].name;
      out << name << std::string(width - name.size() + 2, ' ')
          << Abbreviate(CellText(listing.rows[0][c], listing.columns[c], Format::kTable)) << '\n';
    }
    return;
  }
  std::vector<std::vector<std::string>> cells;
  std::vector<size_t> widths;
  std::vector<bool> numeric(shown.size(), true);
  for (size_t c : shown) widths.push_back(listing.columns[c].name.size());
  for (const auto& row : listing.rows) {
    auto& texts = cells.emplace_back();
    for (size_t i = 0; i < shown.size(); ++i) {
      const json& value = row[shown[i]];
      texts.push_back(Abbreviate(CellText(value, listing.columns[shown[i]], Format::kTable)));
      widths[i] = std::max(widths[i], texts.back().size());
      if (!value.is_number() && !value.is_null()) numeric[i] = false;
    }
  }
  auto print_line = [&](const std::vector<std::string>& texts) {
    std::string line;
    for (size_t i = 0; i < texts.size(); ++i) {
      const std::string padding(widths[i] - texts[i].size(), ' ');
      if (i > 0) line += "  ";
      line += numeric[i] ? padding + texts[i] : texts[i] + padding;
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out << line << '\n';
  };
  std::vector<std::string> header, rule;
  for (size_t i = 0; i < shown.size(); ++i) {
    header.push_back(listing.columns[shown[i]].name);
    rule.push_back(std::string(widths[i], '-'));
  }
  print_line(header);
  print_line(rule);
  for (const auto& texts : cells) print_line(texts);
  if (listing.rows.empty()) out << "(none)\n";
}

// RFC 4180: a field with a comma, quote or line break is quoted, quotes doubled.
std::string CsvField(const std::string& text) {
  if (text.find_first_of(",\"\r\n") == std::string::npos &&
      (text.empty() || (text.front() != ' ' && text.back() != ' '))) {
    return text;
  }
  std::string quoted = "\"";
  for (char c : text) {
    if (c == '"') quoted += '"';
    quoted += c;
  }
  return quoted + '"';
}

void PrintCsv(const Listing& listing, std::ostream& out) {
  for (size_t c = 0; c < listing.columns.size(); ++c) {
    out << (c > 0 ? "," : "") << CsvField(listing.columns[c].name);
  }
  out << '\n';
  for (const auto& row : listing.rows) {
    for (size_t c = 0; c < listing.columns.size(); ++c) {
      out << (c > 0 ? "," : "") << CsvField(CellText(row[c], listing.columns[c], Format::kCsv));
    }
    out << '\n';
  }
}

void PrintJson(const Listing& listing, std::ostream& out) {
  json array = json::array();
  for (const auto& row : listing.rows) {
    json object = json::object();
    for (size_t c = 0; c < listing.columns.size(); ++c) object[listing.columns[c].name] = row[c];
    array.push_back(std::move(object));
  }
  out << array.dump(2) << '\n';
}

}  // namespace

Format ParseFormat(const std::string& name) {
  if (name == "csv") return Format::kCsv;
  if (name == "json") return Format::kJson;
  return Format::kTable;
}

void Print(const Listing& listing, Format format, std::ostream& out) {
  switch (format) {
    case Format::kTable:
      PrintTable(listing, out);
      break;
    case Format::kCsv:
      PrintCsv(listing, out);
      break;
    case Format::kJson:
      PrintJson(listing, out);
      break;
  }
}

}  // namespace ios::db
