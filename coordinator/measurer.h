// The measurement seam of a search: a batch of stage queries in, one result
// per query out. In-process (MakeLocalMeasurer) or through the ZeroMQ farm
// (coordinator/farm.h), behind the same interface.
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "common/measurement.h"
#include "common/stage.h"
#include "worker/backend.h"

namespace ios::coordinator {

struct IndexedResult {
  size_t index = 0;  // into the specs given to MeasureAll
  MeasureResult result;
};

class Measurer {
 public:
  virtual ~Measurer() = default;
  //! The device class every result is valid for. May block until the first
  //! worker that serves it has connected (when only a worker can tell).
  virtual const DeviceInfo& Device() const = 0;
  //! Measures every spec at `batch_size`. Calls `on_results` on the calling
  //! thread with the results that arrived since its last call (at least
  //! one), so the caller can commit them together without waiting for more;
  //! over the whole call every spec gets exactly one result.
  virtual void MeasureAll(
      const std::vector<const StageSpec*>& specs, int batch_size, const MeasureSettings& settings,
      const std::function<void(std::span<const IndexedResult>)>& on_results) = 0;
  //! Workers serving the search now (for progress lines); thread-safe.
  virtual int ActiveWorkers() const { return 1; }
};

//! Measures on `backend` in the calling thread, one stage at a time.
std::unique_ptr<Measurer> MakeLocalMeasurer(std::unique_ptr<worker::Backend> backend);

}  // namespace ios::coordinator
