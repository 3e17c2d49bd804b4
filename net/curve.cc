#include "net/curve.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string_view>
#include <system_error>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <zmq.hpp>
#include <zmq_addon.hpp>

#include "common/error.h"

namespace ios::net {
namespace {

namespace fs = std::filesystem;

constexpr size_t kZ85KeySize = 40;     // a CURVE key as Z85 text
constexpr size_t kBinaryKeySize = 32;  // the same key as bytes
constexpr std::uintmax_t kMaxKeyFileSize = 64 * 1024;
constexpr const char* kFieldCharacters =
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_";
constexpr const char* kZapEndpoint = "inproc://zeromq.zap.01";
constexpr const char* kZapDomain = "ios-farm";  // the ZAP domain of our CURVE servers
// How often the ZAP thread checks for a stop request: the longest a destructor waits.
constexpr std::chrono::milliseconds kZapPollInterval{50};
// ZMQ_ZAP_ENFORCE_DOMAIN is a DRAFT option in libzmq 4.3 (zmq.h hides it
// without ZMQ_BUILD_DRAFT_API); its number is stable since 4.3.0.
constexpr int kZapEnforceDomainOption = 93;

std::string ErrnoText(int error) {
  return std::error_code(error, std::generic_category()).message();
}

// Throws ios::Error naming the libzmq call, where it was made and libzmq's
// own error text when `rc` is -1.
void CheckZmq(int rc, const char* call, const char* file, int line) {
  if (rc != -1) return;
  throw Error(std::string(call) + " failed (" + file + ":" + std::to_string(line) +
              "): " + zmq_strerror(zmq_errno()));
}

//! Checks one libzmq C call that returns -1 on failure.
#define IOS_ZMQ_CHECK(call) CheckZmq((call), #call, __FILE__, __LINE__)

// Empty when `text` is a CURVE key as 40 characters of Z85; otherwise what is
// wrong with it. Never quotes `text`: it may be a secret key.
std::string Z85KeyProblem(const std::string& text) {
  if (text.size() != kZ85KeySize) {
    return "is not a CURVE key: expected 40 characters of Z85, got " + std::to_string(text.size());
  }
  std::array<uint8_t, kBinaryKeySize> binary{};
  if (zmq_z85_decode(binary.data(), text.c_str()) == nullptr) {
    return "is not a CURVE key: 40 characters, but not all from the Z85 alphabet";
  }
  return {};
}

// The public key that belongs to `secret_key` (a valid Z85 key).
std::string PublicKeyOf(const std::string& secret_key) {
  std::array<char, kZ85KeySize + 1> public_key{};
  IOS_ZMQ_CHECK(zmq_curve_public(public_key.data(), secret_key.c_str()));
  return public_key.data();
}

// Throws unless `keys` holds two valid keys that belong together. `what`
// names the pair in the message ("the CURVE server's key pair").
void RequireKeyPair(const CurveKeyPair& keys, const std::string& what) {
  if (const std::string problem = Z85KeyProblem(keys.public_key); !problem.empty()) {
    throw Error("the public key of " + what + " " + problem);
  }
  if (keys.secret_key.empty()) throw Error(what + " has no secret key (a .pub file was given?)");
  if (const std::string problem = Z85KeyProblem(keys.secret_key); !problem.empty()) {
    throw Error("the secret key of " + what + " " + problem);
  }
  if (PublicKeyOf(keys.secret_key) != keys.public_key) {
    throw Error("the secret key of " + what + " does not belong to its public key");
  }
}

// Text of a file or frame fit for one log or error line: at most `limit`
// characters, anything unprintable shown as '?'.
std::string Printable(std::string_view text, size_t limit = 64) {
  std::string out;
  for (char c : text.substr(0, limit)) out += (c >= 0x20 && c < 0x7f) ? c : '?';
  if (text.size() > limit) out += "...";
  return out;
}

std::string Trim(std::string_view text) {
  const size_t begin = text.find_first_not_of(" \t\r");
  if (begin == std::string_view::npos) return {};
  const size_t end = text.find_last_not_of(" \t\r");
  return std::string(text.substr(begin, end - begin + 1));
}

// An owned POSIX file descriptor.
class FileDescriptor {
 public:
  explicit FileDescriptor(int fd) : fd_(fd) {}
  ~FileDescriptor() {
    if (fd_ >= 0) ::close(fd_);
  }
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  int get() const { return fd_; }
  //! Closes now; returns close's result (0 or -1 with errno set).
  int Close() {
    const int rc = ::close(fd_);
    fd_ = -1;
    return rc;
  }

 private:
  int fd_;
};

// Creates `path` (it must not exist: O_EXCL, and a symlink there counts as
// existing) with exactly `mode`, writes `text` and syncs it. On failure
// removes what it created and throws ios::Error naming the file.
void WriteNewFile(const fs::path& path, const std::string& text, mode_t mode) {
  FileDescriptor fd(
      ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode));
  if (fd.get() < 0) {
    const int error = errno;
    if (error == EEXIST) {
      throw Error(path.string() + " already exists: refusing to overwrite it");
    }
    throw Error("cannot create " + path.string() + ": " + ErrnoText(error));
  }
  auto fail = [&](const std::string& doing, int error) {
    std::error_code ignored;
    fs::remove(path, ignored);
    throw Error("cannot " + doing + " " + path.string() + ": " + ErrnoText(error));
  };
  // The umask may have narrowed `mode`; set it exactly (0600 must stay 0600,
  // and a .pub is meant to be readable).
  if (::fchmod(fd.get(), mode) != 0) fail("set the mode of", errno);
  for (size_t written = 0; written < text.size();) {
    const ssize_t n = ::write(fd.get(), text.data() + written, text.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail("write", errno);
    written += static_cast<size_t>(n);
  }
  if (::fsync(fd.get()) != 0) fail("sync", errno);
  if (fd.Close() != 0) fail("close", errno);
}

// Throws unless `name` can be the stem of a file directly in the key dir.
void RequireKeyName(const std::string& name) {
  const bool control = std::any_of(name.begin(), name.end(),
                                   [](char c) { return c >= 0 && (c < 0x20 || c == 0x7f); });
  if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos ||
      control) {
    throw Error("key pair name '" + Printable(name) +
                "' is not a plain file name (no '/' or control characters; not empty, '.' or "
                "'..')");
  }
}

// The text of NAME.key: both keys, under a warning.
std::string KeyFileText(const std::string& name, const CurveKeyPair& keys) {
  std::string text = "# ios-farm CURVE key pair '" + name + "'. SECRET: keep this file private\n";
  text += "# (mode 0600), on this host only; hand out " + name + ".pub instead.\n";
  text += "public-key = " + keys.public_key + "\n";
  text += "secret-key = " + keys.secret_key + "\n";
  return text;
}

// The text of NAME.pub: the public key only.
std::string PubFileText(const std::string& name, const std::string& public_key) {
  std::string text = "# ios-farm CURVE public key '" + name + "'. Not secret: a worker's goes\n";
  text +=
      "# into the coordinator's allow-list directory; the coordinator's goes to every worker.\n";
  text += "public-key = " + public_key + "\n";
  return text;
}

using Frames = std::vector<zmq::message_t>;

}  // namespace

CurveKeyPair GenerateCurveKeyPair() {
  if (!zmq_has("curve")) {
    throw Error("cannot make a CURVE key pair: this libzmq was built without CURVE");
  }
  std::array<char, kZ85KeySize + 1> public_key{}, secret_key{};
  IOS_ZMQ_CHECK(zmq_curve_keypair(public_key.data(), secret_key.data()));
  return {public_key.data(), secret_key.data()};
}

void WriteKeyPair(const fs::path& dir, const std::string& name, const CurveKeyPair& keys) {
  RequireKeyName(name);
  RequireKeyPair(keys, "the key pair '" + name + "'");
  std::error_code error;
  fs::create_directories(dir, error);
  if (error) throw Error("cannot create directory " + dir.string() + ": " + error.message());

  const fs::path key_path = dir / (name + ".key");
  const fs::path pub_path = dir / (name + ".pub");
  // Refuse before writing anything, so a refusal leaves no half pair behind.
  // (O_EXCL below closes the race with another writer.)
  for (const fs::path& path : {key_path, pub_path}) {
    if (fs::exists(fs::symlink_status(path, error))) {
      throw Error(path.string() + " already exists: refusing to overwrite it (to replace the " +
                  "pair, delete " + name + ".key and " + name + ".pub first)");
    }
  }
  WriteNewFile(key_path, KeyFileText(name, keys), 0600);
  try {
    WriteNewFile(pub_path, PubFileText(name, keys.public_key), 0644);
  } catch (...) {
    std::error_code ignored;
    fs::remove(key_path, ignored);
    throw;
  }
}

CurveKeyPair LoadKeyFile(const fs::path& path) {
  const std::string file = path.string();
  std::error_code error;
  const fs::file_status status = fs::status(path, error);
  if (!fs::exists(status)) throw Error("key file " + file + " does not exist");
  if (!fs::is_regular_file(status)) throw Error("key file " + file + " is not a regular file");
  const std::uintmax_t size = fs::file_size(path, error);
  if (!error && size > kMaxKeyFileSize) {
    throw Error("key file " + file + " is too large (" + std::to_string(size) +
                " bytes) to be a key file");
  }
  std::ifstream in(path);
  if (!in) throw Error("cannot read key file " + file + ": " + ErrnoText(errno));

  CurveKeyPair keys;
  int line_number = 0, public_line = 0, secret_line = 0;
  for (std::string line; std::getline(in, line);) {
    ++line_number;
    const std::string where = file + ":" + std::to_string(line_number) + ": ";
    const std::string text = Trim(line);
    if (text.empty() || text[0] == '#') continue;
    if (Z85KeyProblem(text).empty()) {  // a key pasted without its field; never echoed
      throw Error(where + "a bare key: expected 'public-key = KEY' or 'secret-key = KEY'");
    }
    // `field = value`; the field is a run of letters, digits, '-' and '_'
    // (Z85 has '=' in its alphabet: a key's text is never taken for a field).
    const size_t field_end = std::min(text.size(), text.find_first_not_of(kFieldCharacters));
    const size_t equals = text.find_first_not_of(" \t", field_end);
    if (field_end == 0 || equals == std::string::npos || text[equals] != '=') {
      throw Error(where + "expected 'public-key = KEY' or 'secret-key = KEY'");
    }
    const std::string field = text.substr(0, field_end);
    const std::string value = Trim(std::string_view(text).substr(equals + 1));
    if (field != "public-key" && field != "secret-key") {
      throw Error(where + "unknown field" +
                  (field.size() <= 32 ? " '" + field + "'" : std::string()) +
                  " (expected public-key or secret-key)");
    }
    const bool is_public = field == "public-key";
    std::string& slot = is_public ? keys.public_key : keys.secret_key;
    int& slot_line = is_public ? public_line : secret_line;
    if (slot_line != 0) {
      throw Error(where + field + " given twice (first on line " + std::to_string(slot_line) + ")");
    }
    if (const std::string problem = Z85KeyProblem(value); !problem.empty()) {
      throw Error(where + field + " " + problem);
    }
    slot = value;
    slot_line = line_number;
  }
  if (in.bad()) throw Error("cannot read key file " + file + ": " + ErrnoText(errno));

  const std::string extension = path.extension().string();
  if (public_line == 0) throw Error(file + ": no public-key line");
  if (extension == ".pub" && secret_line != 0) {
    throw Error(file + ":" + std::to_string(secret_line) +
                ": a .pub file must not hold a secret key (it is handed out); "
                "treat this key pair as leaked");
  }
  if (extension == ".key" && secret_line == 0) {
    throw Error(file + ": no secret-key line (a .key file holds both keys)");
  }
  if (secret_line != 0 && PublicKeyOf(keys.secret_key) != keys.public_key) {
    throw Error(file + ":" + std::to_string(secret_line) +
                ": secret-key does not belong to the public-key on line " +
                std::to_string(public_line));
  }
  return keys;
}

std::vector<std::string> LoadAllowList(const fs::path& dir) {
  std::error_code error;
  if (!fs::is_directory(dir, error)) {
    throw Error("allow-list directory " + dir.string() + " does not exist or is not a directory");
  }
  std::vector<fs::path> files;
  fs::directory_iterator it(dir, error);
  for (const fs::directory_iterator end; !error && it != end; it.increment(error)) {
    const fs::path& path = it->path();
    if (path.extension() == ".pub") files.push_back(path);
    if (path.extension() == ".key") {
      spdlog::warn(
          "allow-list directory {} holds the secret key file {}: only .pub files belong "
          "there; move it away",
          dir.string(), path.filename().string());
    }
  }
  if (error) {
    throw Error("cannot list allow-list directory " + dir.string() + ": " + error.message());
  }
  if (files.empty()) {
    throw Error("allow-list directory " + dir.string() +
                " has no *.pub file: no worker could connect");
  }
  std::sort(files.begin(), files.end());
  std::vector<std::string> keys;
  keys.reserve(files.size());
  for (const fs::path& path : files) keys.push_back(LoadKeyFile(path).public_key);
  return keys;
}

void MakeCurveServer(zmq::socket_t& socket, const CurveKeyPair& server) {
  RequireKeyPair(server, "the CURVE server's key pair");
  try {
    socket.set(zmq::sockopt::curve_server, true);
    socket.set(zmq::sockopt::curve_secretkey, server.secret_key);
    socket.set(zmq::sockopt::curve_publickey, server.public_key);
    socket.set(zmq::sockopt::zap_domain, kZapDomain);
  } catch (const zmq::error_t& e) {
    throw Error(std::string("cannot make the socket a CURVE server: ") + e.what());
  }
  // Fail closed: by default libzmq admits every CURVE client when no ZAP
  // handler is bound (no CurveAuthenticator yet, or no longer). Enforcing
  // needs the domain set above: with enforcement on and no domain, libzmq
  // 4.3 skips ZAP altogether.
  const int enforce = 1;
  if (zmq_setsockopt(socket.handle(), kZapEnforceDomainOption, &enforce, sizeof enforce) != 0) {
    spdlog::warn(
        "libzmq lacks ZMQ_ZAP_ENFORCE_DOMAIN ({}): a CURVE server without a ZAP "
        "handler admits every client",
        zmq_strerror(zmq_errno()));
  }
}

void MakeCurveClient(zmq::socket_t& socket, const CurveKeyPair& client,
                     const std::string& server_public_key) {
  RequireKeyPair(client, "the CURVE client's key pair");
  if (const std::string problem = Z85KeyProblem(server_public_key); !problem.empty()) {
    throw Error("the server's public key " + problem);
  }
  try {
    socket.set(zmq::sockopt::curve_serverkey, server_public_key);
    socket.set(zmq::sockopt::curve_publickey, client.public_key);
    socket.set(zmq::sockopt::curve_secretkey, client.secret_key);
  } catch (const zmq::error_t& e) {
    throw Error(std::string("cannot make the socket a CURVE client: ") + e.what());
  }
}

// The ZAP handler (ZeroMQ RFC 27, ZAP 1.0) of one context.
struct CurveAuthenticator::State {
  State(zmq::context_t& context, std::vector<std::string> keys)
      : socket(context, zmq::socket_type::rep), allowed(keys.begin(), keys.end()) {}

  //! The thread's loop: answers ZAP requests until `stop`, then closes `socket`.
  void Serve(const std::stop_token& stop) noexcept;
  //! The ZAP reply to one request; never throws for a malformed request.
  Frames Answer(const Frames& request);

  //! Logs one refusal as a warning, unless the same refusal (peer address
  //! and reason) was logged less than kRefusalQuiet ago: a refused worker
  //! retries every few seconds and would fill the log. The next line says
  //! how many were held back.
  void WarnRefused(const std::string& refusal);

  //! How often one refusal is logged at most.
  static constexpr std::chrono::seconds kRefusalQuiet{60};

  zmq::socket_t socket;  // bound by the constructor, then used by `thread` only
  const std::unordered_set<std::string> allowed;  // Z85 public keys
  std::atomic<int64_t> accepted{0}, refused{0};
  struct Logged {
    std::chrono::steady_clock::time_point at;
    int64_t held_back = 0;
  };
  std::unordered_map<std::string, Logged> logged_refusals;  // `thread` only
  // Last: it starts once everything above exists, and is stopped and joined
  // before any of it goes, however the State goes.
  std::jthread thread;
};

void CurveAuthenticator::State::Serve(const std::stop_token& stop) noexcept {
  while (!stop.stop_requested()) {
    try {
      Frames request;
      // rcvtimeo is kZapPollInterval: nothing came, check `stop` again.
      if (!zmq::recv_multipart(socket, std::back_inserter(request))) continue;
      zmq::send_multipart(socket, Answer(request));
    } catch (const zmq::error_t& e) {
      if (e.num() == ETERM) break;  // the context is being destroyed
      spdlog::error("CURVE authenticator: {} (going on)", e.what());
      std::this_thread::sleep_for(kZapPollInterval);  // no busy loop on a lasting error
    } catch (const std::exception& e) {
      spdlog::error("CURVE authenticator: {} (going on)", e.what());
    }
  }
  // Unbinding frees the endpoint now (closing alone frees it later, in
  // libzmq's reaper thread), so a new authenticator can bind at once.
  try {
    socket.unbind(kZapEndpoint);
  } catch (const zmq::error_t& e) {
    if (e.num() != ETERM) spdlog::error("CURVE authenticator: unbinding: {}", e.what());
  }
  socket.close();
}

Frames CurveAuthenticator::State::Answer(const Frames& request) {
  auto reply = [&](std::string_view code, std::string_view text, std::string_view user_id) {
    Frames frames;
    frames.emplace_back(std::string_view("1.0"));
    if (request.size() > 1) {
      frames.emplace_back(request[1].data(), request[1].size());  // request id, echoed
    } else {
      frames.emplace_back();
    }
    frames.emplace_back(code);
    frames.emplace_back(text);
    frames.emplace_back(user_id);
    frames.emplace_back();  // metadata: none
    return frames;
  };
  // Request: version, request id, domain, address, identity, mechanism, credentials...
  if (request.size() < 6 || request[0].to_string_view() != "1.0") {
    spdlog::warn("CURVE authenticator: malformed ZAP request ({} frames) ignored", request.size());
    return reply("500", "malformed ZAP request", "");
  }
  const std::string address = Printable(request[3].to_string_view());
  const std::string_view mechanism = request[5].to_string_view();
  if (mechanism != "CURVE") {
    ++refused;
    WarnRefused("a " + Printable(mechanism) + " handshake from " + address +
                ": only CURVE is admitted");
    return reply("400", "only CURVE is admitted", "");
  }
  if (request.size() != 7 || request[6].size() != kBinaryKeySize) {
    spdlog::warn("CURVE authenticator: malformed CURVE ZAP request from {} ignored", address);
    return reply("500", "malformed ZAP request", "");
  }
  std::array<char, kZ85KeySize + 1> key{};
  if (zmq_z85_encode(key.data(), static_cast<const uint8_t*>(request[6].data()), kBinaryKeySize) ==
      nullptr) {
    return reply("500", "cannot encode the client key", "");
  }
  const std::string client_key = key.data();
  if (!allowed.contains(client_key)) {
    ++refused;
    WarnRefused(address + " with public key " + client_key + ": not on the allow list");
    return reply("400", "key not on the allow list", "");
  }
  ++accepted;
  spdlog::debug("CURVE authenticator: admitted {} with public key {}", address, client_key);
  return reply("200", "OK", client_key);  // User-Id of the peer's messages
}

void CurveAuthenticator::State::WarnRefused(const std::string& refusal) {
  const auto now = std::chrono::steady_clock::now();
  auto [it, first] = logged_refusals.try_emplace(refusal, Logged{now, 0});
  if (!first && now - it->second.at < kRefusalQuiet) {
    ++it->second.held_back;
    return;
  }
  if (it->second.held_back > 0) {
    spdlog::warn("CURVE authenticator: refused {} (and {} more times in the last {} s)", refusal,
                 it->second.held_back,
                 std::chrono::duration_cast<std::chrono::seconds>(now - it->second.at).count());
  } else {
    spdlog::warn("CURVE authenticator: refused {}", refusal);
  }
  it->second = Logged{now, 0};
}

CurveAuthenticator::CurveAuthenticator(Context& context,
                                       std::vector<std::string> allowed_public_keys) {
  for (size_t i = 0; i < allowed_public_keys.size(); ++i) {
    if (const std::string problem = Z85KeyProblem(allowed_public_keys[i]); !problem.empty()) {
      throw Error("allowed public key #" + std::to_string(i + 1) + " " + problem);
    }
  }
  if (allowed_public_keys.empty()) {
    spdlog::warn("CURVE authenticator: the allow list is empty: every client will be refused");
  }
  auto state = std::make_unique<State>(context.zmq(), std::move(allowed_public_keys));
  try {
    state->socket.set(zmq::sockopt::linger, 0);
    state->socket.set(zmq::sockopt::rcvtimeo, static_cast<int>(kZapPollInterval.count()));
    state->socket.set(zmq::sockopt::sndtimeo, static_cast<int>(kZapPollInterval.count()));
    // Bound here, before the constructor returns, so the handler exists before
    // any server socket of this context can start a handshake.
    state->socket.bind(kZapEndpoint);
  } catch (const zmq::error_t& e) {
    throw Error(std::string("cannot start the CURVE authenticator: binding ") + kZapEndpoint +
                ": " + e.what() +
                (e.num() == EADDRINUSE ? " (this context already has a ZAP handler)" : ""));
  }
  State* raw = state.get();  // outlives the thread: ~CurveAuthenticator joins first
  state->thread = std::jthread([raw](std::stop_token stop) { raw->Serve(stop); });
  state_ = std::move(state);
}

CurveAuthenticator::~CurveAuthenticator() {
  state_->thread.request_stop();
  if (state_->thread.joinable()) state_->thread.join();
}

int64_t CurveAuthenticator::accepted() const { return state_->accepted.load(); }

int64_t CurveAuthenticator::refused() const { return state_->refused.load(); }

}  // namespace ios::net
