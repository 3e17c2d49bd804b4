// Internal to db/: the network_runs table (schema version 4), end-to-end
// figures of networks under schedules. The ProfileStore calls it inside its
// busy-retry wrapper.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "db/profile_store.h"
#include "db/sqlite_util.h"

namespace ios::db::detail {

class NetworkRunTable {
 public:
  explicit NetworkRunTable(sqlite3* db);
  std::optional<NetworkRunRow> Lookup(const NetworkRunKey& key);
  void Store(const NetworkRunRow& row);
  std::vector<NetworkRunRow> List(const std::string& model);
  //! Deletes the rows `filter` selects (checked by the caller); how many.
  int64_t Forget(const ForgetFilter& filter);

 private:
  sqlite3* db_;
  sqlite::Statement lookup_, store_, list_;
};

}  // namespace ios::db::detail
