// The checks every tool makes of a path a user names for it to write
// (--out, --report, --output): said before any work, and leaving no trace.
#include "common/input_file.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace ios {
namespace {

namespace fs = std::filesystem;

class OutputFileProblemTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "output_file_test.XXXXXX").string();
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(OutputFileProblemTest, ANewFileInAWritableFolderIsFineAndNotLeftBehind) {
  const fs::path path = dir_ / "report.html";
  EXPECT_EQ(OutputFileProblem(path.string()), "");
  EXPECT_FALSE(fs::exists(path));
}

TEST_F(OutputFileProblemTest, AnExistingFileKeepsItsBytes) {
  const fs::path path = dir_ / "schedule.json";
  std::ofstream(path) << "kept";
  EXPECT_EQ(OutputFileProblem(path.string()), "");
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_EQ(text.str(), "kept");
}

TEST_F(OutputFileProblemTest, SaysWhyADirectoryOrAMissingFolderCannotBeWritten) {
  EXPECT_EQ(OutputFileProblem(dir_.string()), "it is a directory");
  const std::string missing = OutputFileProblem((dir_ / "no" / "such.html").string());
  EXPECT_NE(missing.find("No such file"), std::string::npos) << missing;
}

}  // namespace
}  // namespace ios
