// Which cuDNN algorithm runs each convolution of the cuda device, and
// whether cuDNN runs it fused with bias and relu: decided when a program is
// prepared (never inside a timed region or a capture) and remembered for
// the device's life, per convolution problem.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>

#include "devices/cuda/cuda_api.h"
#include "devices/cuda/cuda_device.h"
#include "devices/cuda/cuda_internal.h"
#include "devices/cuda/cuda_pool.h"
#include "exec/weights.h"

namespace ios::devices::cuda_detail {

//! What the device remembers about convolution problems, for its life.
struct AlgorithmCache {
  std::map<std::string, cuda::AlgoResult> chosen;  // by ProblemKey
  std::map<std::string, bool> fused_relu_runs;     // by ProblemKey and algorithm
};

//! The largest power of two dividing `address`, at most 256 bytes (what
//! any cuDNN kernel may ask of a float operand; cudaMalloc gives 256).
int AlignmentOf(const void* address);

//! A convolution problem as the algorithm cache knows it: shapes, strides,
//! geometry, every setting that changes which algorithms run and how fast,
//! and the alignment of each operand's address (an algorithm found for an
//! aligned view may not run, or run wrong, on a less aligned one: a channel
//! view of a 17x17 map at an odd offset is only 4-byte aligned).
std::string ProblemKey(const cuda::TensorLayout& x, const void* x_address,
                       const exec::ConvWeights& w, const void* w_address,
                       const cuda::ConvGeometry& geometry, const cuda::TensorLayout& y,
                       const void* y_address, const CudaOptions& options);

//! The algorithm search of one prepare: chooses each convolution's
//! algorithm. The scratch an exhaustive search runs in is the pool's, kept
//! for the next search when it has the whole cap.
class AlgorithmSearch {
 public:
  AlgorithmSearch(cuda::Api& api, const CudaOptions& options, AlgorithmCache& cache,
                  DevicePool& pool)
      : api_(api), options_(options), cache_(cache), pool_(pool) {}

  //! The first algorithm cuDNN reports as running `problem` (a ProblemKey)
  //! within the workspace cap and the asked math, searched on the given
  //! buffers (overwritten) once per problem. Throws ExecError (unsupported
  //! when none runs); `where` names the step.
  cuda::AlgoResult Choose(const std::string& problem, cuda::DnnHandle dnn, cuda::TensorDesc x,
                          const void* input, cuda::FilterDesc filter, const void* kernel,
                          cuda::ConvDesc conv, cuda::TensorDesc y, void* output,
                          const std::string& where);

  //! Gives a scratch smaller than the cap back (the GPU was short of
  //! memory: the next search tries for the whole cap again).
  void Finish();

 private:
  //! The pool's scratch when it has the cap, else the cap or as much of it
  //! as the GPU gives (halving down to 1 MiB, then none).
  void AllocateScratch(size_t cap);

  cuda::Api& api_;
  const CudaOptions& options_;
  AlgorithmCache& cache_;
  DevicePool& pool_;
  bool scratch_tried_ = false;
};

//! Whether cuDNN runs the convolution `key` names (a ProblemKey with its
//! algorithm) fused with bias and relu: `trial`, the fused call, is made
//! once per key for the device's life. Any answer but success and a lost
//! context means "not fused" (logged, remembered): the three separate
//! calls compute the same, so a refusal of the fusion costs time, never
//! the stage. A lost context throws DeviceLostError.
bool FusionRuns(AlgorithmCache& cache, const std::string& key,
                const std::function<cuda::Status()>& trial, const std::string& where);

}  // namespace ios::devices::cuda_detail
