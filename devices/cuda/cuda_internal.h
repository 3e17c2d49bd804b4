// What the cuda device's files share (devices/cuda/cuda_device.h is the
// public face): the error a failed call means, owners of library objects,
// and how a view becomes a cuDNN tensor. Not for use outside devices/cuda.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "devices/cuda/cuda_api.h"
#include "devices/cuda/cuda_device.h"
#include "exec/device.h"
#include "exec/program.h"

namespace ios::devices::cuda_detail {

//! The ExecError a failed call means; `where` says what we were doing.
[[noreturn]] void Fail(const cuda::Status& status, const std::string& where);

inline void Check(const cuda::Status& status, const std::string& where) {
  if (!status.ok()) Fail(status, where);
}

//! Owns one library object and gives it back through `Destroy` (errors of a
//! destroy are ignored: there is nothing left to do about them).
template <class H, cuda::Status (cuda::Api::*Destroy)(H)>
class Owned {
 public:
  Owned() = default;
  Owned(cuda::Api& api, H handle) : api_(&api), handle_(handle) {}
  Owned(Owned&& other) noexcept : api_(other.api_), handle_(std::exchange(other.handle_, H{})) {}
  Owned& operator=(Owned&& other) noexcept {
    if (this != &other) {
      Reset();
      api_ = other.api_;
      handle_ = std::exchange(other.handle_, H{});
    }
    return *this;
  }
  Owned(const Owned&) = delete;
  Owned& operator=(const Owned&) = delete;
  ~Owned() { Reset(); }
  H get() const { return handle_; }

 private:
  void Reset() {
    if (handle_) (void)(api_->*Destroy)(handle_);
    handle_ = H{};
  }
  cuda::Api* api_ = nullptr;
  H handle_{};
};

using DeviceMemory = Owned<void*, &cuda::Api::Free>;
using OwnedStream = Owned<cuda::Stream, &cuda::Api::DestroyStream>;
using OwnedEvent = Owned<cuda::Event, &cuda::Api::DestroyEvent>;
using OwnedGraph = Owned<cuda::Graph, &cuda::Api::DestroyGraph>;
using OwnedGraphExec = Owned<cuda::GraphExec, &cuda::Api::DestroyGraphExec>;
using OwnedDnn = Owned<cuda::DnnHandle, &cuda::Api::DestroyDnn>;
using OwnedTensor = Owned<cuda::TensorDesc, &cuda::Api::DestroyTensor>;
using OwnedFilter = Owned<cuda::FilterDesc, &cuda::Api::DestroyFilter>;
using OwnedConv = Owned<cuda::ConvDesc, &cuda::Api::DestroyConvolution>;
using OwnedActivation = Owned<cuda::ActivationDesc, &cuda::Api::DestroyActivation>;
using OwnedPooling = Owned<cuda::PoolingDesc, &cuda::Api::DestroyPooling>;
using OwnedOpTensor = Owned<cuda::OpTensorDesc, &cuda::Api::DestroyOpTensor>;

inline DeviceMemory Allocate(cuda::Api& api, size_t bytes, const std::string& what) {
  void* pointer = nullptr;
  Check(api.Malloc(bytes, pointer), "allocating " + what);
  return {api, pointer};
}

//! "1.50 MiB", "256 MiB".
std::string MiB(double bytes);

//! The cuDNN tensor of `view` at `batch`.
inline cuda::TensorLayout LayoutOf(const exec::BufferDesc& buffer, const exec::View& view,
                                   int batch) {
  const Shape& s = buffer.shape;
  const int64_t plane = int64_t{s.h} * s.w;
  return {batch, view.channels, s.h, s.w, int64_t{s.c} * plane, plane, s.w, 1};
}

//! "NxCxHxW/stride_n,stride_c,stride_h,stride_w".
std::string Describe(const cuda::TensorLayout& t);

}  // namespace ios::devices::cuda_detail
