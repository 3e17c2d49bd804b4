// Running a built binary from a test: a bounded command line whose stdout
// and stderr come back apart, and the small file helpers such tests need.
#pragma once

#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace ios::testing {

struct CliResult {
  int exit_code = -1;  // 124: killed by the time limit
  std::string out, err;
};

inline std::string ShellQuote(const std::string& text) {
  std::string quoted = "'";
  for (char c : text) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

inline std::string ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

//! False when the file could not be written.
inline bool WriteFile(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  return out.good();
}

//! Runs `binary args` (args already shell-quoted as needed) in `dir`, under
//! `timeout_s`, keeping at most `max_output` bytes of stdout.
inline CliResult RunBinary(const std::filesystem::path& dir, const std::string& binary,
                           const std::string& args, int timeout_s = 120,
                           size_t max_output = size_t{16} << 20) {
  const std::filesystem::path err = dir / ".stderr.txt";
  const std::string command = "cd " + ShellQuote(dir.string()) + " && timeout " +
                              std::to_string(timeout_s) + " " + ShellQuote(binary) + " " + args +
                              " 2>" + ShellQuote(err.string());
  CliResult result;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return result;
  char buffer[4096];
  for (size_t n; (n = fread(buffer, 1, sizeof buffer, pipe)) > 0;) {
    if (result.out.size() < max_output) result.out.append(buffer, n);
  }
  const int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  result.err = ReadFile(err);
  std::filesystem::remove(err);
  return result;
}

//! A fresh directory under the system temp dir, removed with the object.
class TempDir {
 public:
  explicit TempDir(const std::string& prefix) {
    std::string pattern = (std::filesystem::temp_directory_path() / (prefix + ".XXXXXX")).string();
    if (mkdtemp(pattern.data()) != nullptr) path_ = pattern;
  }
  ~TempDir() {
    if (!path_.empty()) std::filesystem::remove_all(path_);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  //! Empty when the directory could not be made.
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

}  // namespace ios::testing
