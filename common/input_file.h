// Reading a file a user named on a command line (a model, a schedule,
// weights, an import, an --input): one set of checks for every tool, so that
// a directory, a FIFO or /dev/zero is refused before anything reads it; and
// the one check of a file a tool will write (--out, --report, --output).
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

namespace ios {

//! No bound on the size (CheckInputFile for files read piecemeal, a DB).
inline constexpr std::uintmax_t kAnySize = std::numeric_limits<std::uintmax_t>::max();

//! Checks, without opening it, that `path` is a regular file of at most
//! `max_bytes` (following links) and returns its size. A directory, FIFO,
//! socket or device would fail obscurely, block forever or never end
//! (/dev/zero). `kind` words the messages ("model", "weights", "import").
//! Throws ios::Error naming the file, what it is and what was expected.
std::uintmax_t CheckInputFile(const std::string& path, std::string_view kind,
                              std::uintmax_t max_bytes);

//! CheckInputFile, then reads the file whole, and stops with an ios::Error at
//! `max_bytes` should it grow while being read.
std::string ReadInputFile(const std::string& path, std::string_view kind, std::uintmax_t max_bytes);

//! A file read whole without copying it: CheckInputFile, then mapped
//! read-only and populated at once (an ONNX model's hundreds of MB of
//! weights: a read into a fresh buffer costs a page fault per 4 KiB, and the
//! bytes would be in memory twice). Unmapped when destroyed. A file
//! truncated by another process while mapped is undefined, as for any map.
class MappedInputFile {
 public:
  MappedInputFile(const std::string& path, std::string_view kind, std::uintmax_t max_bytes);
  ~MappedInputFile();
  MappedInputFile(const MappedInputFile&) = delete;
  MappedInputFile& operator=(const MappedInputFile&) = delete;

  std::string_view bytes() const { return {static_cast<const char*>(data_), size_}; }

 private:
  void* data_ = nullptr;  // nullptr for an empty file, which mmap refuses
  size_t size_ = 0;
};

//! Why `path` cannot be written ("it is a directory", strerror's words), or
//! "" when it can. Run before any work, so that a typo costs nothing: it
//! opens the file to append nothing, and removes it again if it was not
//! there before, leaving no trace.
std::string OutputFileProblem(const std::string& path);

//! "64 MiB" for whole mebibytes, else "N bytes": limits in messages.
std::string ByteCountText(std::uintmax_t bytes);

}  // namespace ios
