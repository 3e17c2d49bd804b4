// Issue 21 bug 8: a zoo name and a file of the same name in the working
// directory; neither is picked silently.
#include "common/model_source.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "common/error.h"
#include "common/ios_json.h"
#include "common/zoo.h"

namespace ios {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

// Runs the test in a fresh working directory holding a file "squeezenet"
// (the tiny graph written by ToIosJson under another name).
class ModelSourceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "model_source_test.XXXXXX").string();
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
    previous_ = fs::current_path();
    fs::current_path(dir_);
    Graph graph = BuildZooModel("squeezenet");
    graph.name = "my_squeezenet";
    std::ofstream("squeezenet") << ToIosJson(graph);
  }
  void TearDown() override {
    fs::current_path(previous_);
    fs::remove_all(dir_);
  }
  static std::string ErrorOf(const std::string& model) {
    try {
      LoadModel(model);
    } catch (const Error& e) {
      return e.what();
    }
    return "(no error)";
  }

  fs::path dir_, previous_;
};

TEST_F(ModelSourceTest, AZooNameThatIsAlsoAFileHereIsRefusedAsAmbiguous) {
  EXPECT_THAT(ErrorOf("squeezenet"),
              HasSubstr("'squeezenet' names both a zoo model and a file here: write ./squeezenet "
                        "for the file or zoo:squeezenet for the zoo model"));
}

TEST_F(ModelSourceTest, APathOrTheZooPrefixSaysWhichIsMeant) {
  EXPECT_EQ(LoadModel("./squeezenet").name, "my_squeezenet");
  EXPECT_EQ(LoadModel("zoo:squeezenet").name, "squeezenet");
  EXPECT_EQ(LoadModel("inception_v3").name, "inception_v3");  // no such file: the zoo
  EXPECT_THAT(ErrorOf("zoo:resnet"), HasSubstr("unknown zoo model 'resnet'"));
}

TEST_F(ModelSourceTest, AFolderOfAZooModelsNameIsNoModelFile) {
  fs::create_directory("nasnet");
  EXPECT_EQ(LoadModel("nasnet").name, "nasnet");
}

}  // namespace
}  // namespace ios
