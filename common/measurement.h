// What a measurement is: the settings it was taken under, the device it was
// taken on, and its result. Shared by backends, the DB and the search.
#pragma once

#include <string>
#include <string_view>

namespace ios {

//! How a stage is put on the device when it is timed; part of the
//! measurement's key (docs/execution.md).
enum class StageProtocol {
  //! Each run alone: the cpu flushes all of the stage's data first, a GPU
  //! launches and synchronises every run. Every row stored before
  //! protocols were keyed was measured this way; the sim models it.
  kIsolated,
  //! As a schedule runs it (exec::PreparedProgram::TimedRunsAsExecuted).
  kExecuted,
};
const char* ToString(StageProtocol protocol);

//! The IOS protocol: `warmup` runs, then `repeat` times the mean of `number`
//! runs; the result is the median of the repeat means (exec/protocol.h).
//! Adaptive when max_repeat > repeat: more repeats, up to max_repeat, until
//! the spread of the last `repeat` means is at most max_relative_spread of
//! their median (for noisy devices such as a shared CPU).
struct MeasureSettings {
  int warmup = 2;
  int number = 6;
  int repeat = 6;
  int max_repeat = 0;  // <= repeat: not adaptive
  double max_relative_spread = 0;
  std::string dtype = "float32";
  StageProtocol protocol = StageProtocol::kIsolated;
  //! kExecuted on the cpu: whether a whole run of the network leaves the
  //! stage's weights in the caches (decided by the search from the
  //! network's footprint against the device's cache).
  bool warm_weights = false;
  bool Adaptive() const { return max_repeat > repeat; }
  //! Canonical text used in DB keys, e.g. "w2-n6-r6-float32", or
  //! "w2-n6-r6-max30-spread5%-float32" when adaptive (spread in whole
  //! percent: the key of a setting must not depend on float printing),
  //! followed by "-executed-wcold" or "-executed-wwarm" for kExecuted.
  std::string Key() const;
};

//! The protocol a settings key (MeasureSettings::Key) was made with: its
//! "-executed-w..." suffix, or kIsolated (every key made before protocols
//! were keyed). What the profiling DB stores beside each settings row.
StageProtocol ProtocolOfSettingsKey(std::string_view settings_key);

//! How a device's timings come about, which decides its default settings
//! (DefaultMeasureSettings; coordinator::DefaultVerifySettings). Each
//! backend kind says which (devices::BackendKind::timing), so no tool has
//! to recognise a device by its name.
enum class DeviceTiming {
  //! From a model (sim): exact, and isolated, the protocol its model
  //! describes.
  kModelled,
  //! A real device whose host launches every run (cpu, reference): a
  //! shared machine's noise reaches each one.
  kHostLaunched,
  //! A real device that times a stage as executed by replaying a recorded
  //! graph of it (cuda): no host launch inside the timed span.
  kGraphReplayed,
};
const char* ToString(DeviceTiming timing);

//! The settings a search uses unless told otherwise, by how the device
//! times (docs/execution.md, docs/gpu.md):
//! - kModelled: IOS's W=2, N=6, R=6, kIsolated ("w2-n6-r6-float32").
//! - kHostLaunched: W=2, N=6, R=6, adaptive up to 30 repeats until the last
//!   six agree within 5% (a shared CPU is noisy), kExecuted with cold
//!   weights (the search decides warm_weights from the network and the
//!   device, coordinator/weight_warmth.h).
//! - kGraphReplayed: kExecuted with fewer, tighter repeats: W=4, N=8, R=5,
//!   adaptive up to 15 until the last five agree within 3% (why: the
//!   definition's comment).
MeasureSettings DefaultMeasureSettings(DeviceTiming timing);

//! Identifies a device class. Measurements are valid per fingerprint:
//! identical GPUs on different hosts share them.
struct DeviceInfo {
  std::string backend;      // "sim", "cuda", "cpu"
  std::string name;         // e.g. "sim:v100" or "NVIDIA H100 80GB HBM3"
  std::string fingerprint;  // everything that makes timings comparable
  bool simulated = false;   // true: figures come from a model, not a device
};

enum class MeasureError { kNone, kOutOfMemory, kUnsupported, kBackendFailure, kTimeout };
const char* ToString(MeasureError error);
//! True for failures that say nothing lasting about the stage (a timeout, a
//! lost worker, which the farm reports as a timeout, a backend failure): they
//! are stored for diagnosis but measured again by the next search. Out of
//! memory and unsupported are facts about the stage and are reused.
bool IsTransient(MeasureError error);

struct MeasureResult {
  double median_ms = 0;  // median of the repeat means
  double spread_ms = 0;  // max - min of the repeat means
  int samples = 0;       // number of timed runs
  MeasureError error = MeasureError::kNone;
  std::string error_message;
  //! What the backend chose to run the stage, for the record (cuda: each
  //! convolution's algorithm and math); empty when there is nothing to say.
  std::string detail;
  bool ok() const { return error == MeasureError::kNone; }
};

}  // namespace ios
