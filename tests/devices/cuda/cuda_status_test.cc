// What each cuDNN status means to the cuda device (cuda_real_support.h),
// on the real library: cuDNN's status calls run on the host, so this runs
// on any machine that built the cuda backend, GPU or not. A refusal of the
// arguments is deterministic; an unsupported problem is a fact about the
// stage; an installation that lacks a part, an internal or execution error
// may pass and is measured again.
#include <gtest/gtest.h>

#include <utility>
#include <vector>

#include "devices/cuda/cuda_real_support.h"

namespace ios::cuda {
namespace {

TEST(CudaStatusTest, EachCuDnnStatusMeansWhatItSaysAboutTheStage) {
  const std::vector<std::pair<cudnnStatus_t, Code>> cases = {
      {CUDNN_STATUS_SUCCESS, Code::kOk},
      {CUDNN_STATUS_BAD_PARAM, Code::kRefused},
      {CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH, Code::kRefused},
      {CUDNN_STATUS_BAD_PARAM_MISALIGNED_POINTER, Code::kRefused},
      {CUDNN_STATUS_NOT_SUPPORTED, Code::kUnsupported},
      {CUDNN_STATUS_NOT_SUPPORTED_SHAPE, Code::kUnsupported},
      {CUDNN_STATUS_NOT_SUPPORTED_INCOMPATIBLE_CUDART, Code::kFailure},
      {CUDNN_STATUS_NOT_SUPPORTED_SUBLIBRARY_UNAVAILABLE, Code::kFailure},
      {CUDNN_STATUS_INTERNAL_ERROR, Code::kFailure},
      {CUDNN_STATUS_EXECUTION_FAILED, Code::kFailure},
      {CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED, Code::kOutOfMemory},
  };
  for (const auto& [status, code] : cases) {
    const Status mapped = FromDnn(status, "cudnnSomething");
    EXPECT_EQ(mapped.code, code) << "cuDNN status " << static_cast<int>(status);
    if (code != Code::kOk) {
      EXPECT_EQ(mapped.call, "cudnnSomething");
      EXPECT_FALSE(mapped.message.empty());
    }
  }
}

}  // namespace
}  // namespace ios::cuda
