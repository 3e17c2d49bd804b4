#include "common/input_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "common/error.h"
#include "common/printable.h"

namespace ios {
namespace {

const char* FileTypeText(std::filesystem::file_type type) {
  switch (type) {
    case std::filesystem::file_type::directory:
      return "a directory";
    case std::filesystem::file_type::fifo:
      return "a FIFO";
    case std::filesystem::file_type::character:
      return "a character device";
    case std::filesystem::file_type::block:
      return "a block device";
    case std::filesystem::file_type::socket:
      return "a socket";
    default:
      return "not a plain file";
  }
}

std::string TooLarge(const std::string& where, std::string_view kind, std::uintmax_t max_bytes) {
  return where + ": more than the " + ByteCountText(max_bytes) + " a " + std::string(kind) +
         " file may have";
}

}  // namespace

std::string ByteCountText(std::uintmax_t bytes) {
  constexpr std::uintmax_t kMiB = std::uintmax_t{1} << 20;
  if (bytes >= kMiB && bytes % kMiB == 0) return std::to_string(bytes / kMiB) + " MiB";
  return std::to_string(bytes) + " bytes";
}

std::uintmax_t CheckInputFile(const std::string& path, std::string_view kind,
                              std::uintmax_t max_bytes) {
  namespace fs = std::filesystem;
  const std::string where = Printable(path);
  std::error_code error;
  const fs::file_status status = fs::status(path, error);
  if (status.type() == fs::file_type::not_found) {
    throw Error(where + ": cannot open file: not found");
  }
  if (error) throw Error(where + ": cannot open file (" + error.message() + ")");
  if (!fs::is_regular_file(status)) {
    throw Error(where + ": not a regular file (" + FileTypeText(status.type()) + "); a " +
                std::string(kind) + " file must be a regular file");
  }
  const std::uintmax_t size = fs::file_size(path, error);
  if (error) throw Error(where + ": cannot read the size (" + error.message() + ")");
  if (size > max_bytes) {
    throw Error(where + ": " + std::to_string(size) + " bytes, " +
                TooLarge("", kind, max_bytes).substr(2));
  }
  return size;
}

MappedInputFile::MappedInputFile(const std::string& path, std::string_view kind,
                                 std::uintmax_t max_bytes)
    : size_(static_cast<size_t>(CheckInputFile(path, kind, max_bytes))) {
  if (size_ == 0) return;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error(Printable(path) + ": cannot open file (" + std::strerror(errno) + ")");
  void* data = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
  const int map_errno = errno;
  ::close(fd);  // the mapping keeps the file
  if (data == MAP_FAILED) {
    throw Error(Printable(path) + ": cannot map file (" + std::strerror(map_errno) + ")");
  }
  data_ = data;
}

MappedInputFile::~MappedInputFile() {
  if (data_ != nullptr) ::munmap(data_, size_);
}

std::string ReadInputFile(const std::string& path, std::string_view kind,
                          std::uintmax_t max_bytes) {
  const std::uintmax_t size = CheckInputFile(path, kind, max_bytes);
  const std::string where = Printable(path);
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(where + ": cannot open file");
  std::string text;
  text.reserve(static_cast<size_t>(size));
  char buffer[1 << 16];
  while (in.read(buffer, sizeof buffer) || in.gcount() > 0) {
    text.append(buffer, static_cast<size_t>(in.gcount()));
    if (text.size() > max_bytes) throw Error(TooLarge(where, kind, max_bytes) + " (it grew)");
  }
  if (in.bad()) throw Error(where + ": read error");
  return text;
}

std::string OutputFileProblem(const std::string& path) {
  std::error_code error;
  if (std::filesystem::is_directory(path, error)) return "it is a directory";
  const bool existed = std::filesystem::exists(path, error);
  std::FILE* file = std::fopen(path.c_str(), "a");  // appends nothing, truncates nothing
  if (file == nullptr) return std::strerror(errno);
  std::fclose(file);
  if (!existed) std::filesystem::remove(path, error);
  return "";
}

}  // namespace ios
