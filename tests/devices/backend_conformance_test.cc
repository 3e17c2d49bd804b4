// What every backend built promises the farm, whatever its device: errors
// come back as results (never exceptions), the fingerprint is stable across
// instances, every op kind, sequential units, sliced and summed inputs,
// concurrent and merge stages measure, and an absurd batch size is an
// out-of-memory result. No timing assertions.
#include <gtest/gtest.h>

#include <cctype>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/graph.h"
#include "common/limits.h"
#include "common/network_spec.h"
#include "common/stage.h"
#include "devices/backend.h"
#include "devices/linked.h"
#include "tests/devices/op_network.h"
#include "tests/testing/ops.h"

namespace ios::devices {
namespace {

//! The backends of this build (cuda: its tests skip, saying why, without a
//! GPU).
std::vector<std::string> BuiltBackends() {
  std::vector<std::string> names{"sim:v100"};
#ifdef IOS_HAVE_CPU_BACKEND
  names.push_back("cpu");
#endif
#ifdef IOS_HAVE_CUDA_BACKEND
  names.push_back("cuda");
#endif
  return names;
}

//! A backend by name, as ios-worker opens it (cuda included where linked).
std::unique_ptr<Backend> OpenBackend(const std::string& name) {
  return LinkedRegistry().OpenBackend(name);
}

//! Small and quick: tiny shapes, few runs (also under the sanitizers).
MeasureSettings Quick() {
  MeasureSettings settings;
  settings.warmup = 1;
  settings.number = 2;
  settings.repeat = 2;
  return settings;
}

class BackendConformanceTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    const bool cuda = GetParam().starts_with("cuda");
    try {
      backend_ = OpenBackend(GetParam());
    } catch (const Error& e) {
      if (cuda) GTEST_SKIP() << "no GPU to run on: " << e.what();
      throw;
    }
  }

  void ExpectMeasures(const StageSpec& spec, int batch = 1) {
    SCOPED_TRACE(spec.Describe() + " at batch " + std::to_string(batch));
    MeasureResult result;
    ASSERT_NO_THROW(result = backend_->Measure(spec, batch, Quick()));
    EXPECT_TRUE(result.ok()) << ToString(result.error) << ": " << result.error_message;
    EXPECT_GT(result.samples, 0);
    EXPECT_GT(result.median_ms, 0);
  }

  std::unique_ptr<Backend> backend_;
  Network net_;
};

TEST_P(BackendConformanceTest, EveryOpKindMeasuresAtBatch1And2) {
  for (NodeId node = 1; node < net_.size(); ++node) {
    for (const int batch : {1, 2}) {
      ExpectMeasures(net_.Spec(Strategy::kParallel, {{net_.graph().node(node).name}}), batch);
    }
  }
}

TEST_P(BackendConformanceTest, SequentialGroupsConcurrentGroupsAndMergeStagesMeasure) {
  ExpectMeasures(net_.Spec(Strategy::kParallel, {{"conv3", "conv1_after_conv3"}}));
  ExpectMeasures(net_.Spec(Strategy::kParallel, {{"conv3"}, {"conv1"}}), 2);
  ExpectMeasures(
      net_.Spec(Strategy::kParallel, {{"conv3", "conv1_after_conv3"}, {"max_pool"}, {"relu"}}));
  ExpectMeasures(net_.Spec(Strategy::kParallel,
                           {{"depthwise_s2"}, {"avg_pool"}, {"sep_conv"}, {"summed_slices"}}),
                 2);
  ExpectMeasures(net_.Spec(Strategy::kMerge, {{"conv3"}, {"conv1"}, {"conv5_for_merge"}}));
  ExpectMeasures(net_.Spec(Strategy::kMerge, {{"conv1"}, {"conv5_for_merge"}}), 2);
}

TEST_P(BackendConformanceTest, AdaptiveSettingsMeasureWithinTheirCap) {
  MeasureSettings adaptive = Quick();
  adaptive.max_repeat = 4;
  adaptive.max_relative_spread = 0.5;
  MeasureResult result;
  ASSERT_NO_THROW(result = backend_->Measure(net_.Spec(Strategy::kParallel, {{"conv3"}, {"conv1"}}),
                                             1, adaptive));
  EXPECT_TRUE(result.ok()) << result.error_message;
  EXPECT_GE(result.samples, adaptive.number * adaptive.repeat);
  EXPECT_LE(result.samples, adaptive.number * adaptive.max_repeat);
  EXPECT_GT(result.median_ms, 0);
}

TEST_P(BackendConformanceTest, FingerprintIsStableAcrossInstances) {
  const DeviceInfo& info = backend_->Device();
  EXPECT_FALSE(info.fingerprint.empty());
  EXPECT_FALSE(info.name.empty());
  const std::unique_ptr<Backend> again = OpenBackend(GetParam());
  EXPECT_EQ(again->Device().fingerprint, info.fingerprint);
  EXPECT_EQ(again->Device().name, info.name);
  EXPECT_EQ(again->Device().backend, info.backend);
  EXPECT_EQ(again->Device().simulated, info.simulated);
}

// The search's verification (docs/execution.md): a whole network under a
// schedule, one operator per stage and with concurrent stages.
TEST_P(BackendConformanceTest, AWholeNetworkUnderAScheduleMeasures) {
  NetworkSpec one_by_one{net_.graph(), {}, 3};
  for (NodeId id = 1; id < net_.size(); ++id) {
    one_by_one.stages.push_back({Strategy::kParallel, {{id}}});
  }
  for (const int batch : {1, 2}) {
    MeasureResult result;
    ASSERT_NO_THROW(result = backend_->MeasureNetwork(one_by_one, batch, Quick()));
    EXPECT_TRUE(result.ok()) << ToString(result.error) << ": " << result.error_message;
    EXPECT_GT(result.median_ms, 0);
    EXPECT_GT(result.samples, 0);
  }
  // Two operators that only read the input, side by side.
  NetworkSpec concurrent = one_by_one;
  const NodeId conv3 = *net_.graph().Find("conv3"), conv1 = *net_.graph().Find("conv1");
  std::erase_if(concurrent.stages, [&](const Stage& s) {
    return s.groups.front().front() == conv3 || s.groups.front().front() == conv1;
  });
  concurrent.stages.insert(concurrent.stages.begin(),
                           Stage{Strategy::kParallel, {{conv3}, {conv1}}});
  const MeasureResult result = backend_->MeasureNetwork(concurrent, 1, Quick());
  EXPECT_TRUE(result.ok()) << ToString(result.error) << ": " << result.error_message;
}

TEST_P(BackendConformanceTest, BadRequestsComeBackAsResults) {
  const StageSpec spec = net_.Spec(Strategy::kParallel, {{"conv3"}});
  MeasureSettings float16 = Quick();
  float16.dtype = "float16";
  MeasureSettings no_runs = Quick();
  no_runs.number = 0;
  for (const auto& [batch, settings] :
       std::vector<std::pair<int, MeasureSettings>>{{0, Quick()}, {1, float16}, {1, no_runs}}) {
    MeasureResult result;
    ASSERT_NO_THROW(result = backend_->Measure(spec, batch, settings));
    EXPECT_FALSE(result.ok());
    EXPECT_FALSE(result.error_message.empty());
  }
}

TEST_P(BackendConformanceTest, AMalformedStageComesBackAsAResult) {
  StageSpec spec = net_.Spec(Strategy::kParallel, {{"conv3"}});
  spec.groups[0][0].inputs[0][0].index = 7;  // no such external
  MeasureResult result;
  ASSERT_NO_THROW(result = backend_->Measure(spec, 1, Quick()));
  EXPECT_FALSE(result.ok());
  EXPECT_FALSE(result.error_message.empty());
}

TEST_P(BackendConformanceTest, AnAbsurdBatchSizeIsOutOfMemoryNotACrash) {
  Graph graph;
  Node input{"in", "", {}, {}, {256, 112, 112}};
  input.op.kind = OpKind::kInput;
  graph.nodes.push_back(input);
  graph.nodes.push_back(Node{"big", "", Conv(256, 3, 1), {{{0, 0, 256}}}, {}});
  InferShapes(graph);
  const StageSpec spec = MakeStageSpec(graph, Stage{Strategy::kParallel, {{1}}});
  MeasureResult result;
  ASSERT_NO_THROW(result = backend_->Measure(spec, limits::kMaxBatchSize, Quick()));
  EXPECT_EQ(result.error, MeasureError::kOutOfMemory) << result.error_message;
}

#ifdef IOS_HAVE_CPU_BACKEND
TEST(CpuBackendNameTest, TakesAThreadBudgetAndACacheStateAndRefusesOtherOptions) {
  EXPECT_EQ(OpenBackend("cpu")->Device().backend, "cpu");
#if defined(__x86_64__)
  EXPECT_NE(OpenBackend("cpu")->Device().fingerprint.find("|cache=cold|"), std::string::npos);
#endif
  EXPECT_NE(OpenBackend("cpu,cache=warm")->Device().fingerprint.find("|cache=warm|"),
            std::string::npos);
  EXPECT_NE(OpenBackend("cpu,threads=1")->Device().fingerprint.find("|threads=1|"),
            std::string::npos);
  for (const char* bad : {"cpu,threads=0", "cpu,fast=1", "cpu:0", "cpu,cache=hot"}) {
    try {
      OpenBackend(bad);
      ADD_FAILURE() << "no error for " << bad;
    } catch (const Error& e) {
      EXPECT_TRUE(std::string(e.what()).find("cpu[,threads=N]") != std::string::npos ||
                  std::string(e.what()).find("threads must be") != std::string::npos ||
                  std::string(e.what()).find("cache must be cold or warm") != std::string::npos)
          << e.what();
    }
  }
}
#endif

INSTANTIATE_TEST_SUITE_P(Built, BackendConformanceTest, ::testing::ValuesIn(BuiltBackends()),
                         [](const ::testing::TestParamInfo<std::string>& param) {
                           std::string name;
                           for (char c : param.param) name += std::isalnum(c) ? c : '_';
                           return name;
                         });

}  // namespace
}  // namespace ios::devices
