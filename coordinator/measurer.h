// The measurement seam of a search: a batch of stage queries in, one result
// per query out. In-process (MakeLocalMeasurer) or through the ZeroMQ farm
// (coordinator/farm.h), behind the same interface.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "common/link_measurement.h"
#include "common/measurement.h"
#include "common/network_spec.h"
#include "common/stage.h"
#include "devices/backend.h"

namespace ios::coordinator {

struct IndexedResult {
  size_t index = 0;  // into the specs given to MeasureStream (or MeasureAll)
  MeasureResult result;
  //! A link query's answer when `result` is ok (Measurer::MeasureLink).
  std::optional<LinkMeasurement> link = std::nullopt;
};

class Measurer {
 public:
  //! Specs a search adds to a running MeasureStream.
  using MoreSpecs = std::vector<const StageSpec*>;

  virtual ~Measurer() = default;
  //! The device class every result is valid for. May block until the first
  //! worker that serves it has connected (when only a worker can tell).
  virtual const DeviceInfo& Device() const = 0;
  //! Measures `specs` at `batch_size`, and whatever `on_results` hands back:
  //! it is called on the calling thread with the results that arrived since
  //! its last call, so the caller can commit them together and decide what
  //! to measure next without the workers waiting (none when it has waited a
  //! while in vain: the caller may commit what it holds back); the specs it
  //! returns are numbered after those given so far. Returns when every
  //! spec given has exactly one result. A spec must stay valid until its
  //! result has been delivered.
  virtual void MeasureStream(
      std::vector<const StageSpec*> specs, int batch_size, const MeasureSettings& settings,
      const std::function<MoreSpecs(std::span<const IndexedResult>)>& on_results) = 0;
  //! MeasureStream of a fixed set.
  void MeasureAll(const std::vector<const StageSpec*>& specs, int batch_size,
                  const MeasureSettings& settings,
                  const std::function<void(std::span<const IndexedResult>)>& on_results) {
    MeasureStream(specs, batch_size, settings, [&](std::span<const IndexedResult> results) {
      on_results(results);
      return MoreSpecs{};
    });
  }
  //! Times each of `networks` end to end under its schedule at
  //! `batch_size` (devices::Backend::MeasureNetwork): one result per
  //! network, in order. Networks must stay valid until it returns. Default:
  //! each one unsupported (a measurer that only times stages).
  virtual std::vector<MeasureResult> MeasureNetworks(std::span<const NetworkSpec* const> networks,
                                                     int batch_size,
                                                     const MeasureSettings& settings);
  //! Times the link between two devices of Device()'s class (a worker that
  //! owns two or more of them: Backend::MeasureLink). A failure is a value,
  //! never a wait without end: without such a worker the answer says so at
  //! once. Default: unsupported.
  virtual LinkMeasurement MeasureLink(const LinkQuery& query);
  //! Workers serving the search now (for progress lines); thread-safe.
  virtual int ActiveWorkers() const { return 1; }
  //! Queries the serving workers accept at once, their capacities summed
  //! (what a search keeps in flight so that none waits); thread-safe.
  virtual int Credit() const { return ActiveWorkers(); }
};

//! Measures one spec at a time on the calling thread, each result delivered
//! at once: in-process measurers and test doubles implement MeasureOne.
class OneAtATimeMeasurer : public Measurer {
 public:
  void MeasureStream(
      std::vector<const StageSpec*> specs, int batch_size, const MeasureSettings& settings,
      const std::function<MoreSpecs(std::span<const IndexedResult>)>& on_results) override;
  std::vector<MeasureResult> MeasureNetworks(std::span<const NetworkSpec* const> networks,
                                             int batch_size,
                                             const MeasureSettings& settings) override;

 protected:
  //! Default: unsupported.
  virtual MeasureResult MeasureNetworkOne(const NetworkSpec& network, int batch_size,
                                          const MeasureSettings& settings);
  virtual MeasureResult MeasureOne(const StageSpec& spec, int batch_size,
                                   const MeasureSettings& settings) = 0;
};

//! Measures on `backend` in the calling thread, one stage at a time.
std::unique_ptr<Measurer> MakeLocalMeasurer(std::unique_ptr<devices::Backend> backend);

}  // namespace ios::coordinator
