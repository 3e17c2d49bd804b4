// ios-db import: measurements another farm exported (`ios-db export` as
// JSON) pooled into this DB, like sharing a timing cache. Rows are taken only
// for the device and settings this DB's searches ask for, so nothing
// incomparable is ever mixed in; `force` takes every row, each under its own
// device fingerprint and settings (still never mixed: both are part of a
// measurement's key).
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "db/profile_store.h"

namespace ios::db {

struct ImportRequest {
  //! The receiving device: a fingerprint, or the name of a device this DB
  //! knows (its fingerprint is then the one rows must have).
  std::string device;
  //! The measurement settings key rows must have (e.g. "w2-n6-r6-float32").
  std::string settings;
  //! Take every row whatever its device and settings.
  bool force = false;
};

struct ImportReport {
  int64_t rows = 0;      // in the file
  int64_t imported = 0;  // new here
  int64_t present = 0;   // already measured here: ours kept
  //! Refused rows, by reason ("device fingerprint differs: ...").
  std::map<std::string, int64_t> refused;
};

//! Reads the JSON array `text` (from `source`, named in errors) as written
//! by `ios-db export`, checks every row (row number, field, what was
//! expected), then stores the selected rows in one transaction. Throws
//! ios::Error before writing anything when a row is malformed or the
//! request names an unknown device.
ImportReport ImportMeasurements(ProfileStore& store, const std::string& text,
                                const std::string& source, const ImportRequest& request);

}  // namespace ios::db
