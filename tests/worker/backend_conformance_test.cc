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
#include "common/stage.h"
#include "tests/testing/ops.h"
#include "worker/backend.h"

namespace ios::worker {
namespace {

using ::ios::testing::ActOp;
using ::ios::testing::EltwiseOp;
using ::ios::testing::IdentityOp;
using ::ios::testing::PoolOp;
using ::ios::testing::SequentialOp;

//! The backends of this build.
std::vector<std::string> BuiltBackends() {
  std::vector<std::string> names{"sim:v100"};
#ifdef IOS_HAVE_CPU_BACKEND
  names.push_back("cpu");
#endif
  return names;
}

//! Small and quick: tiny shapes, few runs (also under the sanitizers).
MeasureSettings Quick() {
  MeasureSettings settings;
  settings.warmup = 1;
  settings.number = 2;
  settings.repeat = 2;
  return settings;
}

OpParams Conv(int out, int kernel, int pad, int stride = 1, int dilation = 1, int groups = 1,
              Activation act = Activation::kRelu) {
  OpParams op;
  op.kind = OpKind::kConv;
  op.conv.out_channels = out;
  op.conv.kernel = {kernel, kernel};
  op.conv.padding = {pad, pad};
  op.conv.stride = {stride, stride};
  op.conv.dilation = {dilation, dilation};
  op.conv.groups = groups;
  op.conv.act = act;
  return op;
}

//! A graph with one node of every kind of interest, on an 8x9x9 input.
class Network {
 public:
  Network() {
    Node input{"in", "", {}, {}, {8, 9, 9}};
    input.op.kind = OpKind::kInput;
    graph_.nodes.push_back(input);
    Add("conv3", Conv(8, 3, 1), {{{0, 0, 8}}});
    Add("conv1", Conv(8, 1, 0), {{{0, 0, 8}}});
    Add("depthwise_s2", Conv(8, 3, 1, 2, 1, 8), {{{0, 0, 8}}});
    Add("grouped_dilated", Conv(4, 3, 2, 1, 2, 2, Activation::kSigmoid), {{{0, 0, 8}}});
    Add("conv_tanh_nobias",
        [] {
          OpParams op = Conv(6, 1, 0, 1, 1, 1, Activation::kTanh);
          op.conv.bias = false;
          return op;
        }(),
        {{{0, 0, 8}}});
    Add("max_pool", PoolOp(PoolType::kMax, 3, 2, 1), {{{0, 0, 8}}});
    Add("avg_pool", PoolOp(PoolType::kAvg, 3, 1, 1), {{{0, 0, 8}}});
    Add("global_max", PoolOp(PoolType::kGlobalMax), {{{0, 0, 8}}});
    Add("global_avg", PoolOp(PoolType::kGlobalAvg), {{{0, 0, 8}}});
    Add("relu", ActOp(Activation::kRelu), {{{0, 0, 8}}});
    Add("sigmoid", ActOp(Activation::kSigmoid), {{{0, 0, 8}}});
    Add("add", EltwiseOp(EltwiseType::kAdd), {{{1, 0, 8}}, {{0, 0, 8}}, {{2, 0, 8}}});
    Add("mul", EltwiseOp(EltwiseType::kMul), {{{1, 0, 8}}, {{11, 0, 8}}});
    Add("concat", IdentityOp(), {{{1, 0, 8}}, {{2, 0, 8}}});
    Add("summed_slices", IdentityOp(), {{{1, 0, 4}, {2, 4, 8}}});
    Add("conv_on_slices", Conv(5, 3, 1), {{{1, 2, 6}}, {{2, 0, 3}, {0, 5, 8}}});
    Add("sep_conv",
        SequentialOp(
            {ActOp(Activation::kRelu), Conv(8, 3, 1, 1, 1, 8, Activation::kNone), Conv(8, 1, 0)}),
        {{{0, 0, 8}}});
    Add("conv5_for_merge", Conv(6, 5, 2), {{{0, 0, 8}}});
    Add("conv1_after_conv3", Conv(4, 1, 0), {{{1, 0, 8}}});
    InferShapes(graph_);
  }

  NodeId operator[](const std::string& name) const { return *graph_.Find(name); }
  const Graph& graph() const { return graph_; }
  int size() const { return static_cast<int>(graph_.nodes.size()); }

  StageSpec Spec(Strategy strategy, std::vector<std::vector<std::string>> groups) const {
    Stage stage;
    stage.strategy = strategy;
    for (const auto& group : groups) {
      stage.groups.emplace_back();
      for (const std::string& name : group) stage.groups.back().push_back((*this)[name]);
    }
    return MakeStageSpec(graph_, stage);
  }

 private:
  void Add(const std::string& name, OpParams op, Inputs inputs) {
    Node node{name, "", std::move(op), std::move(inputs), {}};
    graph_.nodes.push_back(std::move(node));
  }
  Graph graph_;
};

class BackendConformanceTest : public ::testing::TestWithParam<std::string> {
 protected:
  void ExpectMeasures(const StageSpec& spec, int batch = 1) {
    SCOPED_TRACE(spec.Describe() + " at batch " + std::to_string(batch));
    MeasureResult result;
    ASSERT_NO_THROW(result = backend_->Measure(spec, batch, Quick()));
    EXPECT_TRUE(result.ok()) << ToString(result.error) << ": " << result.error_message;
    EXPECT_GT(result.samples, 0);
    EXPECT_GT(result.median_ms, 0);
  }

  std::unique_ptr<Backend> backend_ = CreateBackend(GetParam());
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
  const std::unique_ptr<Backend> again = CreateBackend(GetParam());
  EXPECT_EQ(again->Device().fingerprint, info.fingerprint);
  EXPECT_EQ(again->Device().name, info.name);
  EXPECT_EQ(again->Device().backend, info.backend);
  EXPECT_EQ(again->Device().simulated, info.simulated);
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
  EXPECT_EQ(CreateBackend("cpu")->Device().backend, "cpu");
#if defined(__x86_64__)
  EXPECT_NE(CreateBackend("cpu")->Device().fingerprint.find("|cache=cold|"), std::string::npos);
#endif
  EXPECT_NE(CreateBackend("cpu,cache=warm")->Device().fingerprint.find("|cache=warm|"),
            std::string::npos);
  EXPECT_NE(CreateBackend("cpu,threads=1")->Device().fingerprint.find("|threads=1|"),
            std::string::npos);
  for (const char* bad : {"cpu,threads=0", "cpu,fast=1", "cpu:0", "cpu,cache=hot"}) {
    try {
      CreateBackend(bad);
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
}  // namespace ios::worker
