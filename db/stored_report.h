// ios-db report: the HTML report (docs/report.md) of a search the profiling
// DB recorded. A search recorded since schema 5 keeps its report's input
// (searches.report, without the graph, which its schedule JSON carries), so
// its page is the one the search could have written. One recorded before
// has only the returned schedule and totals: its page is partial and says
// at the top what is missing.
#pragma once

#include <cstdint>
#include <string>

#include "common/error.h"
#include "db/profile_store.h"
#include "report/report.h"

namespace ios::db {

//! Which recorded search the command line names: by id, or the latest of a
//! model, narrowed by batch size and device.
struct SearchQuery {
  int64_t id = 0;      // > 0: this search; 0: the latest of `model`
  std::string model;   // used when id is 0
  int batch = 0;       // 0: any
  std::string device;  // device name or fingerprint; empty: any
};

//! The command line named a search the DB does not hold: ios-db answers it
//! as a bad argument (exit 2), like an unknown device elsewhere.
class NoSuchSearch : public Error {
 public:
  using Error::Error;
};

//! The search `query` names; by model, the latest match (the highest id:
//! ids grow as searches are recorded). Throws NoSuchSearch naming the query
//! and `db_path`.
SearchRecord FindSearch(ProfileStore& store, const SearchQuery& query, const std::string& db_path);

//! Who renders a page and when (what a rebuilt, partial report shows as its
//! producer; a stored report keeps the search's own).
struct Renderer {
  std::string tool = "ios-db report";
  std::string version;
  std::string generated_at;  // ISO 8601
};

//! The report input of `search`: its stored report with the graph of its
//! schedule JSON, or, for a search recorded before schema 5, a partial one
//! rebuilt from the row (the returned schedule with its stored stage
//! latencies, their measurement times from the DB, the parts and how they
//! were solved, the phase times, an end-to-end figure the verification
//! stored) with a note naming what is missing. Throws ios::Error naming the
//! search when its schedule JSON or stored report does not parse.
report::ReportInput StoredReportInput(ProfileStore& store, const SearchRecord& search,
                                      const Renderer& renderer);

//! RenderHtml(StoredReportInput(...)); a stored report that does not fit its
//! graph is an ios::Error naming the search.
std::string RenderStoredReport(ProfileStore& store, const SearchRecord& search,
                               const Renderer& renderer);

}  // namespace ios::db
