// ios-keygen NAME [--dir DIR]: makes a CURVE key pair for a coordinator or a
// worker of a farm that spans hosts (see docs/security.md).
#include <CLI/CLI.hpp>
#include <exception>
#include <filesystem>
#include <iostream>
#include <string>

#include "common/error.h"
#include "net/curve.h"

int main(int argc, char** argv) {
  std::string name;
  std::string dir = ".";
  CLI::App app{
      "Make a CURVE key pair for an ios-farm coordinator or worker: NAME.key (secret, mode\n"
      "0600, stays on its host) and NAME.pub (public). Refuses to overwrite either file.\n"
      "A worker's .pub goes into the coordinator's allow-list directory (--curve-allow DIR);\n"
      "the coordinator's .pub is given to every worker (--curve-server-key FILE).",
      "ios-keygen"};
  app.add_option("name", name, "Name of the pair: writes NAME.key and NAME.pub")->required();
  app.add_option("--dir", dir, "Directory to write them to (created if needed)")
      ->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help
    std::cerr << "ios-keygen: " << e.what() << " (see ios-keygen --help)\n";
    return 1;
  }

  try {
    const ios::net::CurveKeyPair keys = ios::net::GenerateCurveKeyPair();
    ios::net::WriteKeyPair(dir, name, keys);
    const std::filesystem::path base = std::filesystem::path(dir) / name;
    std::cout << "wrote " << base.string() << ".key  (secret: keep it on this host)\n"
              << "wrote " << base.string() << ".pub  (public key " << keys.public_key << ")\n"
              << "Next: a worker's .pub goes into the coordinator's allow-list directory\n"
              << "(ios-coordinator --curve-allow DIR); the coordinator's own .pub is given to\n"
              << "every worker (ios-worker --curve-server-key FILE). See docs/security.md.\n";
    return 0;
  } catch (const ios::Error& e) {
    std::cerr << "ios-keygen: " << e.what() << '\n';
  } catch (const std::exception& e) {
    std::cerr << "ios-keygen: unexpected error: " << e.what() << '\n';
  }
  return 1;
}
