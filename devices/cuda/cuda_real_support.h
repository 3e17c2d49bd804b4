// What the real cuda::Api (cuda_api_real.cc) needs beside the library
// calls themselves: what a CUDA or cuDNN status means to the device, and
// NVML's word on the GPU's clocks. Includes CUDA's and cuDNN's headers:
// for cuda_api_real.cc and cuda_real_support.cc only.
#pragma once

#include <cuda_runtime_api.h>
#include <cudnn.h>

#include "devices/cuda/cuda_api.h"

namespace ios::cuda {

//! Errors after which the context is unusable until the process exits.
bool IsSticky(cudaError_t error);

//! The Status of a CUDA runtime call (clearing a non-sticky error, so the
//! next call does not report it again).
Status FromCuda(cudaError_t error, const char* call);

//! The Status of a cuDNN call: out of memory; refused (BAD_PARAM and its
//! sub-codes: the same arguments are refused every time); unsupported
//! (NOT_SUPPORTED and its sub-codes about the problem); device lost (a
//! sticky CUDA error behind it); otherwise a failure that may pass
//! (internal and execution errors, an installation that lacks a part).
Status FromDnn(cudnnStatus_t error, const char* call);

//! Whether the GPU's application clocks are set (nvidia-smi -ac) rather than
//! the defaults, through NVML, which comes with the driver and is opened at
//! run time into `nvml` (a dlopen handle the caller closes). False when
//! unknown.
bool ApplicationClocksSet(int device, void*& nvml);

//! Our handles carry the library's pointers.
template <class T>
T* As(void* handle) {
  return static_cast<T*>(handle);
}

//! cuDNN's math type for ours, and ours for cuDNN's (strict FP32: FMA math
//! from cuDNN 8.0, the default before it).
cudnnMathType_t ToDnn(MathType math);
MathType MathFromDnn(cudnnMathType_t math);

//! Creates a cuDNN descriptor, configures it with `set` (returning a
//! Status) and, when that fails, destroys it again: on success `out` holds
//! it, on failure nothing is left behind.
template <class Descriptor, class Set>
Status MakeDescriptor(cudnnStatus_t (*create)(Descriptor*), const char* create_call,
                      cudnnStatus_t (*destroy)(Descriptor), const Set& set, void*& out) {
  Descriptor d = nullptr;
  if (Status s = FromDnn(create(&d), create_call); !s.ok()) return s;
  Status status = set(d);
  if (!status.ok()) {
    destroy(d);
    return status;
  }
  out = d;
  return status;
}

}  // namespace ios::cuda
