// ios-db's query listings (devices, stats, searches, measurements, runs):
// each builds a Listing (db/listing.h) from the store, printed as a table,
// CSV or JSON by ios-db.
#pragma once

#include <cstddef>
#include <string>

#include "db/listing.h"
#include "db/profile_store.h"

namespace ios::db {

Listing DevicesListing(ProfileStore& store);
Listing StatsListing(ProfileStore& store);
//! Recorded searches, oldest first, each with its id (what `ios-db report
//! --search ID` takes); JSON output nests the settings and schedule.
Listing SearchesListing(ProfileStore& store, Format format);
//! The end-to-end figures of whole networks under schedules (the search's
//! verification and ios-coordinator --evaluate), oldest first.
Listing RunsListing(ProfileStore& store, const std::string& model);
//! Measurements of `model`'s stages (empty: all), narrowed to `device`
//! (name or fingerprint; empty: all), at most `limit` rows (0: all);
//! `total` gets the count before the limit.
Listing MeasurementsListing(ProfileStore& store, const std::string& model,
                            const std::string& device, size_t limit, size_t* total);

}  // namespace ios::db
