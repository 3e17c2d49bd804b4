// The measurement seam of a search: a batch of stage queries in, one result
// per query out. In-process today; the ZeroMQ farm plugs in behind the same
// interface.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "common/measurement.h"
#include "common/stage.h"
#include "worker/backend.h"

namespace ios::coordinator {

class Measurer {
 public:
  virtual ~Measurer() = default;
  //! The device class every result is valid for.
  virtual const DeviceInfo& Device() const = 0;
  //! Measures every spec at `batch_size`. Calls `on_result(i, result)` exactly
  //! once per spec i, on the calling thread, as results arrive (so the caller
  //! can commit each one before the next arrives).
  virtual void MeasureAll(const std::vector<const StageSpec*>& specs, int batch_size,
                          const MeasureSettings& settings,
                          const std::function<void(size_t, const MeasureResult&)>& on_result) = 0;
};

//! Measures on `backend` in the calling thread, one stage at a time.
std::unique_ptr<Measurer> MakeLocalMeasurer(std::unique_ptr<worker::Backend> backend);

}  // namespace ios::coordinator
