#include "db/sqlite_util.h"

#include <filesystem>

namespace ios::db::sqlite {

int Check(int rc, sqlite3* db, const char* call, const char* file, int line,
          std::string_view context) {
  if (rc == SQLITE_OK || rc == SQLITE_ROW || rc == SQLITE_DONE) return rc;
  std::string message = "SQLite error in ";
  message += call;
  message += " at ";
  message += file;
  message += ":" + std::to_string(line) + ": ";
  // sqlite3_errmsg describes the most recent failure on this connection,
  // which is this call's; without a connection only the code is known.
  message += db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
  message += " (code " + std::to_string(rc) + ")";
  if (db != nullptr) {
    const char* filename = sqlite3_db_filename(db, "main");
    if (filename != nullptr && *filename != '\0') {
      message += " [DB ";
      message += filename;
      message += "]";
    }
  }
  if (!context.empty()) {
    message += " [";
    message += context;
    message += "]";
  }
  throw SqliteError(message, rc);
}

DbHandle OpenDb(const std::string& path, int flags) {
  sqlite3* raw = nullptr;
  const int rc = sqlite3_open_v2(path.c_str(), &raw, flags, nullptr);
  DbHandle db(raw);  // owns the handle even when opening failed
  Check(rc, db.get(), "sqlite3_open_v2", __FILE__, __LINE__, path);
  return db;
}

namespace {

// file: URI of `path` with immutable=1 (RFC 3986: '%', '?' and '#' escaped).
std::string ImmutableUri(const std::string& path) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string uri = "file:";
  for (const char c : path) {
    if (c == '%' || c == '?' || c == '#') {
      uri += '%';
      uri += kHex[static_cast<unsigned char>(c) >> 4];
      uri += kHex[static_cast<unsigned char>(c) & 15];
    } else {
      uri += c;
    }
  }
  return uri + "?immutable=1";
}

}  // namespace

DbHandle OpenDbForReading(const std::string& path) {
  DbHandle db = OpenDb(path, SQLITE_OPEN_READONLY);
  // SQLite opens lazily: the first read is what needs the -shm index.
  const int rc =
      sqlite3_exec(db.get(), "SELECT count(*) FROM sqlite_master", nullptr, nullptr, nullptr);
  const int primary = rc & 0xff;
  if (rc == SQLITE_OK || (primary != SQLITE_READONLY && primary != SQLITE_CANTOPEN)) return db;
  // Reading without a log that holds commits would show an older DB
  // without a word (sqlite.org/wal.html, "Read-Only Databases").
  std::error_code error;
  const std::string log = path + "-wal";
  if (const std::uintmax_t size = std::filesystem::file_size(log, error); !error && size > 0) {
    throw Error("cannot read profiling DB " + path + ": its write-ahead log " + log +
                " holds commits, and reading them needs " + path +
                "-shm, which this user cannot create in that folder; let a process that may "
                "write the folder (ios-coordinator, sqlite3 FILE 'PRAGMA wal_checkpoint') open "
                "the DB once: closing it folds the log into the file");
  }
  return OpenDb(ImmutableUri(path), SQLITE_OPEN_READONLY | SQLITE_OPEN_URI);
}

void Exec(sqlite3* db, const char* sql) {
  IOS_SQLITE_CHECK(db, sqlite3_exec(db, sql, nullptr, nullptr, nullptr), sql);
}

Statement::Statement(sqlite3* db, const char* sql) : db_(db) {
  sqlite3_stmt* raw = nullptr;  // stays null when preparing fails
  IOS_SQLITE_CHECK(db, sqlite3_prepare_v3(db, sql, -1, SQLITE_PREPARE_PERSISTENT, &raw, nullptr),
                   sql);
  stmt_.reset(raw);
}

Cursor::~Cursor() {
  // sqlite3_reset repeats the last step's error code; that error was already
  // reported by Next(), so it is deliberately not checked here.
  sqlite3_reset(statement_.get());
  sqlite3_clear_bindings(statement_.get());
}

Cursor& Cursor::BindInt(int index, int64_t value) {
  IOS_SQLITE_CHECK(statement_.db(), sqlite3_bind_int64(statement_.get(), index, value),
                   sqlite3_sql(statement_.get()));
  return *this;
}

Cursor& Cursor::BindReal(int index, double value) {
  IOS_SQLITE_CHECK(statement_.db(), sqlite3_bind_double(statement_.get(), index, value),
                   sqlite3_sql(statement_.get()));
  return *this;
}

Cursor& Cursor::BindText(int index, std::string_view value) {
  IOS_SQLITE_CHECK(statement_.db(),
                   sqlite3_bind_text64(statement_.get(), index, value.data(), value.size(),
                                       SQLITE_TRANSIENT, SQLITE_UTF8),
                   sqlite3_sql(statement_.get()));
  return *this;
}

Cursor& Cursor::BindBlob(int index, std::string_view bytes) {
  IOS_SQLITE_CHECK(
      statement_.db(),
      sqlite3_bind_blob64(statement_.get(), index, bytes.data(), bytes.size(), SQLITE_TRANSIENT),
      sqlite3_sql(statement_.get()));
  return *this;
}

Cursor& Cursor::BindNull(int index) {
  IOS_SQLITE_CHECK(statement_.db(), sqlite3_bind_null(statement_.get(), index),
                   sqlite3_sql(statement_.get()));
  return *this;
}

bool Cursor::Next() {
  return IOS_SQLITE_CHECK(statement_.db(), sqlite3_step(statement_.get()),
                          sqlite3_sql(statement_.get())) == SQLITE_ROW;
}

void Cursor::Run() {
  while (Next()) {
  }
}

bool Cursor::IsNull(int column) const {
  return sqlite3_column_type(statement_.get(), column) == SQLITE_NULL;
}

int64_t Cursor::Int(int column) const { return sqlite3_column_int64(statement_.get(), column); }

double Cursor::Real(int column) const { return sqlite3_column_double(statement_.get(), column); }

std::string Cursor::Text(int column) const {
  const auto* text = sqlite3_column_text(statement_.get(), column);
  if (text == nullptr) return {};
  const int size = sqlite3_column_bytes(statement_.get(), column);
  return std::string(reinterpret_cast<const char*>(text), static_cast<size_t>(size));
}

std::string Cursor::Blob(int column) const {
  const void* bytes = sqlite3_column_blob(statement_.get(), column);
  if (bytes == nullptr) return {};
  const int size = sqlite3_column_bytes(statement_.get(), column);
  return std::string(static_cast<const char*>(bytes), static_cast<size_t>(size));
}

}  // namespace ios::db::sqlite
