// ios-db's output: a listing is columns and rows of JSON values, printed as
// an aligned table (long cells cut), CSV or JSON.
#pragma once

#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <vector>

namespace ios::db {

//! Keeps the columns in listing order in JSON output.
using json = nlohmann::ordered_json;

enum class Format { kTable, kCsv, kJson };
//! "csv", "json"; anything else: the table.
Format ParseFormat(const std::string& name);

struct Column {
  std::string name;
  bool in_table = true;            // long fields are left to csv/json
  std::string table_true = "yes";  // how a boolean reads in a table
  std::string table_false = "no";
};

struct Listing {
  std::vector<Column> columns;
  std::vector<std::vector<json>> rows;
  bool vertical_table = false;  // one row shown as "name  value" lines
};

void Print(const Listing& listing, Format format, std::ostream& out);

}  // namespace ios::db
