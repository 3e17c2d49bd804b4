// What the cuda device keeps for its whole life and lends to every program
// it prepares (docs/gpu.md, "What is pooled"): streams, each with its cuDNN
// handle, join event and convolution workspace; the fork and timing events;
// the algorithm search's scratch. A measurement used to build all of them
// afresh per prepared program (issue 22: N+1 streams, handles, events and
// allocations per stage measured). Sharing is safe because one thread owns
// the device and every program's side-stream work is forked from and joined
// to the origin stream: programs never overlap on the GPU.
#pragma once

#include <cstddef>
#include <deque>
#include <memory>

#include "devices/cuda/cuda_api.h"
#include "devices/cuda/cuda_internal.h"

namespace ios::devices::cuda_detail {

//! A convolution workspace: shared by the pool and the programs compiled
//! against it, so that a larger one replacing it in the pool leaves it
//! alive for the programs (and their recorded graphs) that still use it.
struct Workspace {
  DeviceMemory memory;
  size_t bytes = 0;
};

//! A stream with its own cuDNN handle (bound to it once) and the event the
//! end of a lane on it is recorded on.
struct PooledStream {
  OwnedStream stream;
  OwnedDnn dnn;
  OwnedEvent joined;
  std::shared_ptr<Workspace> workspace;  // null until a convolution needs one
};

class DevicePool {
 public:
  explicit DevicePool(cuda::Api& api) : api_(api) {}
  //! Waits for the pool's streams before their memory goes.
  ~DevicePool();
  DevicePool(const DevicePool&) = delete;
  DevicePool& operator=(const DevicePool&) = delete;

  //! Streams 0 (the origin) .. count - 1, creating those the pool lacks.
  void EnsureStreams(size_t count);
  PooledStream& StreamAt(size_t i) { return streams_.at(i); }
  size_t Streams() const { return streams_.size(); }

  //! Events without timing (forks) and with (a timed region's ends),
  //! created on first use.
  cuda::Event Fork() { return Lazy(fork_, false); }
  cuda::Event Start() { return Lazy(start_, true); }
  cuda::Event End() { return Lazy(end_, true); }

  //! Stream `i`'s workspace, at least `bytes` (> 0): the pool's when it is
  //! large enough, else a new one that replaces it in the pool.
  std::shared_ptr<Workspace> WorkspaceOf(size_t i, size_t bytes);

  //! The algorithm search's scratch: kept between searches when it has the
  //! whole cap, so a device allocates it once.
  DeviceMemory& scratch() { return scratch_; }
  size_t& scratch_bytes() { return scratch_bytes_; }

  //! Gives back the memory only the pool holds (the scratch, workspaces no
  //! living program uses), for a program that would not fit otherwise.
  //! Returns whether anything was given back.
  bool Trim();

 private:
  cuda::Event Lazy(OwnedEvent& event, bool timing);

  cuda::Api& api_;
  std::deque<PooledStream> streams_;  // a deque: lent addresses stay put
  OwnedEvent fork_, start_, end_;
  DeviceMemory scratch_;
  size_t scratch_bytes_ = 0;
};

}  // namespace ios::devices::cuda_detail
