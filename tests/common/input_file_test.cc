// The checks every tool makes of a path a user names for it to write
// (--out, --report, --output): said before any work, and leaving no trace;
// and files mapped whole to be read (MappedInputFile).
#include "common/input_file.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "common/error.h"

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

// MappedInputFile: a model's bytes without a copy.
using MappedInputFileTest = OutputFileProblemTest;  // the same temporary folder

TEST_F(MappedInputFileTest, AMappedFileHoldsItsBytesAndAnEmptyOneNone) {
  const fs::path path = dir_ / "model.onnx";
  std::string bytes(100000, '\0');
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>(i * 7);
  std::ofstream(path, std::ios::binary) << bytes;
  EXPECT_EQ(MappedInputFile(path.string(), "model", kAnySize).bytes(), bytes);

  const fs::path empty = dir_ / "empty.onnx";
  std::ofstream{empty};
  EXPECT_TRUE(MappedInputFile(empty.string(), "model", kAnySize).bytes().empty());
}

TEST_F(MappedInputFileTest, AFileThatCannotBeMappedWhollyIsRefusedBeforeMapping) {
  try {
    MappedInputFile mapped(dir_.string(), "model", kAnySize);
    ADD_FAILURE() << "a directory was mapped";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not a regular file (a directory)"), std::string::npos)
        << e.what();
  }
  const fs::path big = dir_ / "big.onnx";
  std::ofstream(big, std::ios::binary) << std::string(2000, 'x');
  try {
    MappedInputFile mapped(big.string(), "model", 1000);
    ADD_FAILURE() << "a file over the limit was mapped";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("2000 bytes"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace ios
