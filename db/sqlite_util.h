// Private to db/: RAII handles for the sqlite3 C API, the one checking macro
// for SQLite calls, and a cached prepared statement with a scoped cursor.
#pragma once

#include <sqlite3.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <thread>

#include "common/error.h"

namespace ios::db::sqlite {

struct DbCloser {
  void operator()(sqlite3* db) const { sqlite3_close_v2(db); }
};
struct StmtFinalizer {
  void operator()(sqlite3_stmt* stmt) const { sqlite3_finalize(stmt); }
};
using DbHandle = std::unique_ptr<sqlite3, DbCloser>;
using StmtHandle = std::unique_ptr<sqlite3_stmt, StmtFinalizer>;

//! A failed SQLite call; `code` is the (extended) SQLite result code.
class SqliteError : public Error {
 public:
  SqliteError(const std::string& message, int code) : Error(message), code_(code) {}
  int code() const { return code_; }
  int primary_code() const { return code_ & 0xff; }
  //! Another connection held a lock this call needed (SQLITE_BUSY), or a
  //! WAL read could not settle while others wrote (SQLITE_PROTOCOL): trying
  //! again later can succeed.
  bool busy() const { return primary_code() == SQLITE_BUSY || primary_code() == SQLITE_PROTOCOL; }

 private:
  int code_;
};

//! Returns rc when it is SQLITE_OK, SQLITE_ROW or SQLITE_DONE; otherwise
//! throws SqliteError naming the call, file, line, SQLite's message, the DB
//! file and `context` (e.g. the SQL text). `db` may be null.
int Check(int rc, sqlite3* db, const char* call, const char* file, int line,
          std::string_view context = {});

//! Checks one sqlite3_* call: IOS_SQLITE_CHECK(db, sqlite3_exec(...)).
//! An optional third argument adds context to the message.
#define IOS_SQLITE_CHECK(connection, call, ...)                   \
  ::ios::db::sqlite::Check((call), (connection), #call, __FILE__, \
                           __LINE__ __VA_OPT__(, ) __VA_ARGS__)

//! Opens the SQLite file at `path` with sqlite3_open_v2 `flags`
//! (SQLITE_OPEN_READONLY, or SQLITE_OPEN_READWRITE with or without
//! SQLITE_OPEN_CREATE).
DbHandle OpenDb(const std::string& path, int flags);

//! Opens `path` read-only, also where its folder is read-only: a WAL
//! database is read through a -shm index SQLite creates beside it, so there
//! the file is opened as immutable instead (no locks, no -shm), which is
//! exact when no write-ahead log is pending; throws ios::Error when one is.
DbHandle OpenDbForReading(const std::string& path);

//! Runs `body` until it returns without a busy SqliteError, sleeping a
//! little longer after each busy attempt (at most `kMaxRetryPause`). Once
//! `deadline` has passed, the busy error is rethrown. For what the busy
//! timeout does not cover: SQLite returns SQLITE_BUSY at once where waiting
//! could deadlock (e.g. PRAGMA journal_mode = WAL) and for a few races.
//! `body` must be safe to repeat: one statement, or a whole transaction.
inline constexpr std::chrono::milliseconds kMaxRetryPause{50};
template <typename Body>
auto RetryWhileBusy(std::chrono::steady_clock::time_point deadline, Body&& body) {
  std::chrono::milliseconds pause{1};
  while (true) {
    try {
      return body();
    } catch (const SqliteError& e) {
      if (!e.busy() || std::chrono::steady_clock::now() >= deadline) throw;
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, kMaxRetryPause);
  }
}

//! Runs SQL text without results (schema, pragmas that set, BEGIN/COMMIT).
void Exec(sqlite3* db, const char* sql);

//! A prepared statement kept for the life of the connection. Execute it
//! through a Cursor. Borrows `db`, which must outlive it.
class Statement {
 public:
  Statement(sqlite3* db, const char* sql);
  sqlite3* db() const { return db_; }
  sqlite3_stmt* get() const { return stmt_.get(); }

 private:
  sqlite3* db_;
  StmtHandle stmt_;
};

//! One execution of a Statement: bind (1-based), step, read columns
//! (0-based). Resets the statement and clears its bindings when destroyed,
//! so an exception never leaves a statement in progress.
class Cursor {
 public:
  explicit Cursor(Statement& statement) : statement_(statement) {}
  ~Cursor();
  Cursor(const Cursor&) = delete;
  Cursor& operator=(const Cursor&) = delete;

  Cursor& BindInt(int index, int64_t value);
  Cursor& BindReal(int index, double value);
  Cursor& BindText(int index, std::string_view value);
  Cursor& BindBlob(int index, std::string_view bytes);
  Cursor& BindNull(int index);

  //! Steps once; true while a row is available.
  bool Next();
  //! Steps to completion, ignoring any rows.
  void Run();

  bool IsNull(int column) const;
  int64_t Int(int column) const;
  double Real(int column) const;
  std::string Text(int column) const;  // NULL reads as ""
  std::string Blob(int column) const;  // NULL reads as ""

 private:
  Statement& statement_;
};

}  // namespace ios::db::sqlite
