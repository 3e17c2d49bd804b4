// The cuda device's pool of streams, handles, events and workspaces
// (cuda_pool.h).
#include "devices/cuda/cuda_pool.h"

#include <string>

namespace ios::devices::cuda_detail {

DevicePool::~DevicePool() {
  for (PooledStream& s : streams_) (void)api_.SynchronizeStream(s.stream.get());
}

void DevicePool::EnsureStreams(size_t count) {
  while (streams_.size() < count) {
    const std::string which = "stream " + std::to_string(streams_.size());
    // Built aside and added whole: a failure half-way leaves the pool as
    // it was, and RAII gives back what was created.
    PooledStream pooled;
    cuda::Stream stream;
    Check(api_.CreateStream(stream), "creating " + which);
    pooled.stream = {api_, stream};
    cuda::DnnHandle dnn;
    Check(api_.CreateDnn(dnn), "creating the cuDNN handle of " + which);
    pooled.dnn = {api_, dnn};
    Check(api_.SetDnnStream(dnn, stream), "binding a cuDNN handle to " + which);
    cuda::Event joined;
    Check(api_.CreateEvent(joined, false), "creating the join event of " + which);
    pooled.joined = {api_, joined};
    streams_.push_back(std::move(pooled));
  }
}

std::shared_ptr<Workspace> DevicePool::WorkspaceOf(size_t i, size_t bytes) {
  PooledStream& s = streams_.at(i);
  if (s.workspace && s.workspace->bytes >= bytes) return s.workspace;
  auto workspace = std::make_shared<Workspace>();
  workspace->memory = Allocate(api_, bytes, "a convolution workspace");
  workspace->bytes = bytes;
  s.workspace = workspace;
  return workspace;
}

bool DevicePool::Trim() {
  bool freed = scratch_bytes_ > 0;
  scratch_ = DeviceMemory();
  scratch_bytes_ = 0;
  for (PooledStream& s : streams_) {
    if (s.workspace && s.workspace.use_count() == 1) {
      s.workspace.reset();
      freed = true;
    }
  }
  return freed;
}

cuda::Event DevicePool::Lazy(OwnedEvent& event, bool timing) {
  if (!event.get()) {
    cuda::Event created;
    Check(api_.CreateEvent(created, timing), "creating an event");
    event = {api_, created};
  }
  return event.get();
}

}  // namespace ios::devices::cuda_detail
