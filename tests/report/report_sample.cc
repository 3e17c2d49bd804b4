// Writes sample reports to look at in a browser (they are what the unit
// tests render): report_sample OUT_DIR writes small.html (with multi-device
// lanes and a matrix) and large.html (2,000 operators).
#include <fstream>
#include <iostream>
#include <string>

#include "common/error.h"
#include "report/report.h"
#include "tests/report/sample_inputs.h"

namespace {

bool Write(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  out.close();
  if (!out) {
    std::cerr << "report_sample: cannot write " << path << "\n";
    return false;
  }
  std::cout << "file://" << path << "\n";
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: report_sample OUT_DIR\n";
    return 2;
  }
  const std::string dir = argv[1];
  try {
    ios::report::ReportInput small = ios::report::testing::SmallInput();
    small.multi = ios::report::testing::SmallMulti();
    small.matrix = ios::report::testing::SmallMatrix();
    const bool ok =
        Write(dir + "/small.html", ios::report::RenderHtml(small)) &&
        Write(dir + "/large.html", ios::report::RenderHtml(ios::report::testing::LargeInput(2000)));
    return ok ? 0 : 1;
  } catch (const ios::Error& e) {
    std::cerr << "report_sample: " << e.what() << "\n";
    return 1;
  }
}
