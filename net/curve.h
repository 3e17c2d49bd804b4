// CURVE authentication for farms that span hosts: key pairs on disk, and a
// ZAP handler that admits only workers whose public key is on an allow list.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "net/context.h"

namespace zmq {
class socket_t;
}

namespace ios::net {

//! A CURVE key pair as Z85 text (40 characters each). `secret_key` is empty
//! when only a public key was loaded.
struct CurveKeyPair {
  std::string public_key, secret_key;
};

//! A fresh key pair. Throws ios::Error if libzmq was built without CURVE.
CurveKeyPair GenerateCurveKeyPair();

//! Writes `<dir>/<name>.key` (both keys, mode 0600: keep it private) and
//! `<dir>/<name>.pub` (public key only: copy it to the coordinator's allow
//! list). Creates `dir` if needed. Refuses to overwrite either file. Throws
//! ios::Error naming the file on failure.
void WriteKeyPair(const std::filesystem::path& dir, const std::string& name,
                  const CurveKeyPair& keys);

//! Reads a key file written by WriteKeyPair: a .key file gives both keys, a
//! .pub file the public key only. Throws ios::Error naming the file and the
//! line when it is missing, unreadable or not a valid key file.
CurveKeyPair LoadKeyFile(const std::filesystem::path& path);

//! The public keys of every `*.pub` file in `dir`. Throws ios::Error naming
//! the file at fault, or when the directory has no key at all.
std::vector<std::string> LoadAllowList(const std::filesystem::path& dir);

//! Makes `socket` a CURVE server with `server` (both keys required).
//! Call before bind.
void MakeCurveServer(zmq::socket_t& socket, const CurveKeyPair& server);
//! Makes `socket` a CURVE client of the server whose public key is
//! `server_public_key`, authenticating with `client` (both keys required).
//! Call before connect.
void MakeCurveClient(zmq::socket_t& socket, const CurveKeyPair& client,
                     const std::string& server_public_key);

//! The ZAP handler of one context: while it lives, every CURVE handshake on
//! a socket of `context` is accepted only if the client's public key is in
//! `allowed_public_keys`; a refusal is logged (spdlog, warn) with the peer
//! address and key, the same refusal at most once a minute (with a count
//! of the ones held back). Create it before any CURVE server socket binds. Runs one
//! thread; destroying it stops the thread.
class CurveAuthenticator {
 public:
  CurveAuthenticator(Context& context, std::vector<std::string> allowed_public_keys);
  ~CurveAuthenticator();
  CurveAuthenticator(const CurveAuthenticator&) = delete;
  CurveAuthenticator& operator=(const CurveAuthenticator&) = delete;

  int64_t accepted() const;
  int64_t refused() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace ios::net
