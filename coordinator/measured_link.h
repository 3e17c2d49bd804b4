// The link between identical devices as the farm measures it (a worker that
// owns two of them, Backend::MeasureLink), kept in the profiling DB so that
// a rerun measures nothing, and turned into the hios::Link that prices a
// multi-device schedule's copies.
#pragma once

#include <string>

#include "common/link_measurement.h"
#include "coordinator/measurer.h"
#include "db/profile_store.h"
#include "hios/link.h"

namespace ios::coordinator {

//! How a measured link is stored: a row of the network_runs table under a
//! reserved model name, its key naming the device count and the query
//! (docs/hios.md, "Links"); the measurement itself is the row's detail.
inline constexpr const char* kLinkRunModel = "(link)";

struct MeasuredLink {
  hios::Link link;           // the fitted figures, as the schedule prices copies
  LinkMeasurement measured;  // what the worker answered (or the DB held)
  bool reused = false;       // from the DB: nothing was measured
};

//! The link between `devices` devices of measurer.Device()'s class under
//! `query`: the stored one for this fingerprint, device count and query
//! when there is one, else measured through `measurer` and stored. Throws
//! ios::Error with the measurer's reason when it cannot be measured (no
//! worker owns two such devices, a fit refused).
MeasuredLink MeasureOrReuseLink(db::ProfileStore& store, Measurer& measurer, int devices,
                                const LinkQuery& query);

//! The fitted figures and the per-size table, for the coordinator's output.
std::string FormatMeasuredLink(const MeasuredLink& link);

}  // namespace ios::coordinator
