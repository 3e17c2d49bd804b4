// Convolutions padded more at the bottom and right than at the top and left
// (ConvParams::padding_end_extra, TensorFlow's SAME padding at stride 2) on
// the cuda device against the recording fake: cuDNN pads both sides
// equally, so the input view is copied into the interior of a zeroed
// buffer holding all of the padding and the convolution runs unpadded on
// it. The fake computes the copy and the convolution; the result matches
// the reference device. Not run on a GPU here (docs/gpu.md).
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "exec/program.h"
#include "exec/weights.h"
#include "run/network_run.h"
#include "tests/devices/cuda/device_test_support.h"

namespace ios::devices::cuda_testing {
namespace {

OpParams PaddedConv(int out, int kernel, int pad, Window extra, int groups) {
  OpParams op = Conv(out, kernel, pad, 2, 1, groups, Activation::kNone);
  op.conv.bias = false;  // the fake computes the convolution, not a bias or fused relu
  op.conv.padding_end_extra = extra;
  return op;
}

// `op` reading channels [2, 2 + channels) of a wider h x w input and
// writing channels [3, 3 + out) of a wider output, so that strided views
// are padded: the program's one output is the whole output buffer.
exec::Program ConvProgram(const OpParams& op, int channels, int h, int w) {
  const Shape out = InferOpOutput(op, {{channels, h, w}}, "padded conv");
  const int in_c = channels + 3, out_c = out.c + 5;
  exec::Program program;
  program.buffers = {{{in_c, h, w}, 0, "wider input"}, {{out_c, out.h, out.w}, 1, "wider output"}};
  program.slot_elements = {int64_t{in_c} * h * w, int64_t{out_c} * out.h * out.w};
  program.inputs = {0};
  program.outputs = {{1, 0, out_c}};
  program.weights = {exec::RandomConvWeights(op.conv, channels, 5)};
  exec::Step step;
  step.op = op;
  step.inputs = {{0, 2, channels}};
  step.output = {1, 3, out.c};
  step.weights = 0;
  step.label = Describe(op);
  exec::ProgramStage stage;
  stage.lanes.push_back({{step}});
  program.stages.push_back(stage);
  exec::Validate(program);
  return program;
}

// Seeded input, the output buffer filled with -7 first (the channels
// around the view keep it), one run: the whole output buffer.
std::vector<float> RunOnce(exec::Device& device, const exec::Program& program, int batch) {
  auto prepared = device.Prepare(program, batch);
  for (int buffer : {0, 1}) {
    const Shape& s = program.buffers.at(buffer).shape;
    std::vector<float> values =
        exec::SeededValues(static_cast<size_t>(batch) * s.c * s.h * s.w, 31);
    if (buffer == 1) values.assign(values.size(), -7.0f);
    prepared->Write(buffer, values);
  }
  prepared->TimedRuns(1);
  return prepared->Read(program.outputs.at(0));
}

// A small workspace cap: the search's scratch is held on the host while
// the fake computes.
std::unique_ptr<exec::Device> ComputingDevice(const std::shared_ptr<Journal>& journal) {
  journal->compute = true;
  CudaOptions options;
  options.workspace_mb = 4;
  return Device(journal, options);
}

struct PaddedCase {
  std::string name;
  OpParams op;
  int channels, h, w;
};

TEST(CudaConvPaddingTest, PaddedCopyThenUnpaddedConvolutionComputesWhatTheReferenceComputes) {
  const PaddedCase cases[] = {
      // BlazeFace: depthwise 3x3/2 with ONNX pads [0,0,1,1]; 5x5/2 with
      // [1,1,2,2]; and extra rows only, on an odd width.
      {"depthwise 3x3/2 pads 0011", PaddedConv(6, 3, 0, {1, 1}, 6), 6, 8, 8},
      {"5x5/2 pads 1122", PaddedConv(4, 5, 1, {1, 1}, 1), 3, 7, 7},
      {"3x3/2 extra rows only", PaddedConv(3, 3, 1, {2, 0}, 1), 2, 6, 5},
  };
  auto reference = exec::MakeReferenceDevice();
  for (const PaddedCase& c : cases) {
    for (const int batch : {1, 3}) {
      SCOPED_TRACE(c.name + " at batch " + std::to_string(batch));
      const exec::Program program = ConvProgram(c.op, c.channels, c.h, c.w);
      auto journal = std::make_shared<Journal>();
      std::vector<float> got;
      {
        auto device = ComputingDevice(journal);
        got = RunOnce(*device, program, batch);
      }
      EXPECT_EQ(OpCalls(*journal),
                (std::vector<std::string>{"cudnnTransformTensor", "cudnnConvolutionForward"}));
      // The copy: the view's sizes from its buffer's strides into the
      // padded buffer's, which is (2p + extra) rows and columns larger.
      ASSERT_EQ(journal->transforms.size(), 1u);
      const auto& [from, to] = journal->transforms[0];
      const int padded_h = c.h + 2 * c.op.conv.padding.h + c.op.conv.padding_end_extra.h;
      const int padded_w = c.w + 2 * c.op.conv.padding.w + c.op.conv.padding_end_extra.w;
      EXPECT_EQ(from, (cuda::TensorLayout{batch, c.channels, c.h, c.w,
                                          int64_t{c.channels + 3} * c.h * c.w, c.h * c.w, c.w, 1}));
      EXPECT_EQ(to, (cuda::TensorLayout{batch, c.channels, c.h, c.w,
                                        int64_t{c.channels} * padded_h * padded_w,
                                        padded_h * padded_w, padded_w, 1}));
      const run::Comparison diff = run::Compare(got, RunOnce(*reference, program, batch));
      EXPECT_FALSE(diff.sizes_differ);
      EXPECT_LE(diff.max_abs_diff, 1e-5);
      ExpectNoViolations(*journal);
      ExpectNothingAlive(*journal);
    }
  }
}

TEST(CudaConvPaddingTest, AConvolutionWithoutExtraPaddingReadsItsInputAsItIs) {
  auto journal = std::make_shared<Journal>();
  {
    auto device = ComputingDevice(journal);
    RunOnce(*device, ConvProgram(PaddedConv(4, 3, 1, {0, 0}, 1), 3, 8, 8), 2);
  }
  EXPECT_EQ(OpCalls(*journal), std::vector<std::string>{"cudnnConvolutionForward"});
  ExpectNoViolations(*journal);
}

// The padded copy is storage the program holds: a GPU without room for it
// refuses the program as out of memory before allocating anything.
TEST(CudaConvPaddingTest, ThePaddedCopyCountsInTheProgramsMemory) {
  // 64 channels of 1024 x 1024 at batch 4: 1 GiB of input, as much padded.
  const exec::Program program = ConvProgram(PaddedConv(1, 3, 0, {1, 1}, 1), 64, 1024, 1024);
  double storage = 0;
  for (int64_t elements : program.slot_elements) storage += 4.0 * elements * 4;
  auto journal = std::make_shared<Journal>();
  journal->free_bytes = static_cast<size_t>(storage) + (size_t{64} << 20);
  try {
    Device(journal)->Prepare(program, 4);
    ADD_FAILURE() << "prepared without room for the padded input";
  } catch (const exec::ExecError& e) {
    EXPECT_EQ(e.kind(), MeasureError::kOutOfMemory) << e.what();
    EXPECT_NE(std::string(e.what()).find("padded inputs"), std::string::npos) << e.what();
  }
  EXPECT_EQ(journal->live_bytes, 0);
}

}  // namespace
}  // namespace ios::devices::cuda_testing
