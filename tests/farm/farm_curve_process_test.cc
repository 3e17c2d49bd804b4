// The farm under CURVE as users run it: real ios-coordinator and ios-worker
// processes on 127.0.0.1 with keys from ios-keygen, allowed and refused
// workers, and docs/security.md's setup run as written. Every wait is
// bounded; nothing asserts on timing (tests/farm/farm_process_testing.h).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "tests/farm/farm_process_testing.h"
#include "tests/testing/child.h"
#include "tests/testing/process.h"

namespace ios::farm_process_testing {

// Keys under keys/ for the coordinator and each of `workers`, `allowed`'s
// public key in allow/, and the arguments of a CURVE coordinator that
// binds and searches squeezenet with one worker.
std::vector<std::string> FarmProcessTest::CurveCoordinatorArgs(
    const std::vector<std::string>& workers, const std::string& allowed) {
  const fs::path keys = Path("keys"), allow = Path("allow");
  std::vector<std::string> names = workers;
  names.push_back("coordinator");
  for (const std::string& name : names) {
    const testing::CliResult r = Run(kKeygen, name + " --dir " + ShellQuote(keys.string()), 30);
    EXPECT_EQ(r.exit_code, 0) << r.err;
  }
  fs::create_directories(allow);
  fs::copy_file(keys / (allowed + ".pub"), allow / (allowed + ".pub"));
  std::vector<std::string> args = BindArgs("squeezenet", 1);
  for (const std::string& extra :
       {std::string("--curve-secret-key"), (keys / "coordinator.key").string(),
        std::string("--curve-allow"), allow.string()}) {
    args.push_back(extra);
  }
  return args;
}

namespace {

TEST_F(FarmProcessTest, CurveAllowsListedWorkersAndRefusesOthers) {
  const fs::path keys = Path("keys");
  std::vector<std::string> args;
  ASSERT_NO_FATAL_FAILURE(args = CurveCoordinatorArgs({"good", "bad"}, "good"));
  Coordinator c = StartCoordinator("coord", "c.db", args);
  ASSERT_FALSE(c.endpoint.empty());
  const std::vector<std::string> curve = {"--curve-server-key", (keys / "coordinator.pub").string(),
                                          "--curve-key"};
  std::vector<std::string> bad_args = curve, good_args = curve;
  bad_args.push_back((keys / "bad.key").string());
  good_args.push_back((keys / "good.key").string());

  auto bad = StartWorker("bad", c.endpoint, bad_args);
  const auto refused = WaitForText(c.log, "not on the allow list", 15s);
  ASSERT_TRUE(refused.has_value()) << c.Log();
  EXPECT_THAT(*refused, HasSubstr("CURVE authenticator: refused"));
  EXPECT_THAT(*refused, Not(HasSubstr(" joined from ")));
  EXPECT_FALSE(c.process->Wait(0ms).has_value()) << "the coordinator must keep waiting:\n"
                                                 << c.Log();

  auto good = StartWorker("good", c.endpoint, good_args);
  ASSERT_EQ(WaitExit(*c.process, kSearchLimit), 0) << c.Log();
  EXPECT_THAT(c.Log(), HasSubstr("worker good joined"));
  EXPECT_THAT(c.Log(), Not(HasSubstr("worker bad joined")));
  const std::vector<WorkerRow> rows = ParseWorkersTable(c.Report());
  ASSERT_EQ(rows.size(), 1u) << c.Report();
  EXPECT_EQ(rows[0].id, "good");
  EXPECT_EQ(rows[0].answered, Stat("c.db", "measurements"));
  StopWorker(*bad);
  StopWorker(*good);
}

// Issue 7 item 9c: workers that fail the handshake before any message
// (no CURVE at all, or another coordinator's public key) are named in the
// coordinator's log, once per peer and problem however often they retry.
TEST_F(FarmProcessTest, WorkersFailingTheCurveHandshakeAreLoggedOncePerPeer) {
  const fs::path keys = Path("keys");
  std::vector<std::string> args;
  ASSERT_NO_FATAL_FAILURE(args = CurveCoordinatorArgs({"other", "w"}, "w"));
  Coordinator c = StartCoordinator("coord", "c.db", args);
  ASSERT_FALSE(c.endpoint.empty());

  // The lines of the coordinator's log that hold all of `texts`.
  const auto lines_with = [&](const std::vector<std::string>& texts) {
    std::vector<std::string> found;
    std::istringstream in(c.Log());
    for (std::string line; std::getline(in, line);) {
      if (std::all_of(texts.begin(), texts.end(),
                      [&](const std::string& t) { return line.find(t) != std::string::npos; })) {
        found.push_back(line);
      }
    }
    return found;
  };
  // Polls (bounded) until a log line holds all of `texts`.
  const auto wait_for_line = [&](const std::vector<std::string>& texts) {
    const auto deadline = std::chrono::steady_clock::now() + 15s;
    while (lines_with(texts).empty() && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(20ms);
    }
    return !lines_with(texts).empty();
  };
  const std::vector<std::string> no_curve = {"a worker that does not use CURVE",
                                             "start it with --curve-key"};
  const std::vector<std::string> bad_key = {"CURVE handshake failed",
                                            "not this coordinator's public key"};

  auto plain = StartWorker("plain", c.endpoint);  // no CURVE flags at all
  ASSERT_TRUE(wait_for_line({no_curve[0], "from 127.0.0.1"})) << c.Log();
  auto wrong = StartWorker("wrong", c.endpoint,
                           {"--curve-server-key", (keys / "other.pub").string(), "--curve-key",
                            (keys / "w.key").string()});
  ASSERT_TRUE(wait_for_line({bad_key[0], bad_key[1], "from 127.0.0.1"})) << c.Log();
  // Both keep retrying, every ~100 ms; each problem stays one line (two at
  // most: one more when the first attempt's address was already gone).
  EXPECT_LE(lines_with(no_curve).size(), 2u) << c.Log();
  EXPECT_LE(lines_with(bad_key).size(), 2u) << c.Log();
  const std::string log = c.Log();
  EXPECT_FALSE(c.process->Wait(0ms).has_value()) << "the coordinator keeps waiting:\n" << log;
  StopWorker(*plain);
  StopWorker(*wrong);
}

// docs/security.md's setup, run as written on one machine: two directories
// stand for the two hosts, `cp` for `scp`, and only what cannot run here is
// replaced (the host name, the port: an ephemeral one, the model: a small
// one). Every path and flag is the doc's own.
TEST_F(FarmProcessTest, SecurityDocSetupCommandsWorkAsWritten) {
  const std::string doc = ReadFile(fs::path(IOS_TEST_DATA_DIR) / "../../docs/security.md");
  const size_t begin = doc.find("## Setup"), end = doc.find("## What happens");
  ASSERT_NE(begin, std::string::npos);
  ASSERT_NE(end, std::string::npos);
  // The commands: code lines (indented 7 spaces), continuations joined,
  // trailing comments dropped.
  std::vector<std::string> commands;
  std::istringstream in(doc.substr(begin, end - begin));
  bool continued = false;
  for (std::string line; std::getline(in, line);) {
    if (!line.starts_with("       ")) continue;
    std::string text = line.substr(line.find_first_not_of(' '));
    if (const size_t comment = text.find("  #"); comment != std::string::npos) {
      text.erase(comment);
    }
    const bool continues = text.ends_with("\\");
    if (continues) text.pop_back();
    if (continued) {
      commands.back() += " " + text;
    } else {
      commands.push_back(text);
    }
    continued = continues;
  }
  for (std::string& c : commands) c.erase(c.find_last_not_of(' ') + 1);
  ASSERT_EQ(commands.size(), 7u) << "the setup changed: update this test";
  const fs::path coordinator_host = Path("coordinator-host"), worker_host = Path("worker-host");
  for (const fs::path& host : {coordinator_host, worker_host}) {
    fs::create_directories(host);
    fs::create_directory_symlink(IOS_BINARY_DIR, host / "build");
  }
  const auto on = [&](const fs::path& host, std::string command) {
    for (const auto& [from, to] :
         {std::pair<std::string, std::string>{"scp WORKER-HOST:", "cp ../worker-host/"},
          {"scp COORDINATOR-HOST:", "cp ../coordinator-host/"}}) {
      if (command.starts_with(from)) command = to + command.substr(from.size());
    }
    const int status = std::system(
        ("cd " + ShellQuote(host.string()) + " && " + command + " >/dev/null 2>&1").c_str());
    EXPECT_EQ(status, 0) << command;
  };
  on(coordinator_host, commands[0]);  // 1. the coordinator's pair
  on(worker_host, commands[1]);       // 2. the worker's pair
  on(coordinator_host, commands[2]);  // 3. the allow list
  on(coordinator_host, commands[3]);
  on(worker_host, commands[4]);  // 4. the coordinator's .pub

  // 5. The coordinator, then the worker.
  const auto replace = [](std::string text, const std::string& from, const std::string& to) {
    const size_t at = text.find(from);
    EXPECT_NE(at, std::string::npos) << "'" << from << "' not in: " << text;
    return at == std::string::npos ? text : text.replace(at, from.size(), to);
  };
  std::string coordinator = replace(commands[5], "--model nasnet", "--model squeezenet");
  coordinator = replace(coordinator, "'tcp://*:5555'", "'tcp://127.0.0.1:*'");
  const fs::path log = Path("coordinator.log"), out = Path("coordinator.out");
  ChildProcess coordinator_process(
      {"/bin/sh", "-c",
       "cd " + ShellQuote(coordinator_host.string()) + " && exec " + coordinator + " --db c.db -q"},
      out, log);
  const auto listening = WaitForText(log, "listening for workers on ", 15s);
  ASSERT_TRUE(listening.has_value()) << ReadFile(log);
  std::smatch match;
  ASSERT_TRUE(std::regex_search(*listening, match, std::regex("listening for workers on (\\S+)")));
  const std::string worker = replace(commands[6], "tcp://COORDINATOR-HOST:5555", match[1].str());
  ChildProcess worker_process(
      {"/bin/sh", "-c", "cd " + ShellQuote(worker_host.string()) + " && exec " + worker},
      Path("worker.log"));
  EXPECT_EQ(WaitExit(coordinator_process, kSearchLimit), 0) << ReadFile(log);
  const std::vector<WorkerRow> rows = ParseWorkersTable(ReadFile(out));
  ASSERT_EQ(rows.size(), 1u) << ReadFile(out) << ReadFile(log);
  EXPECT_GT(rows[0].answered, 0);
  StopWorker(worker_process);
}

}  // namespace
}  // namespace ios::farm_process_testing
