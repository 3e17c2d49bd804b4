#include "coordinator/worker_process.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <spdlog/spdlog.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "common/error.h"
#include "worker/farm_worker.h"

extern char** environ;

namespace ios::coordinator {
namespace {

namespace fs = std::filesystem;

std::vector<char*> Argv(const std::string& program, const std::vector<std::string>& args,
                        std::vector<std::string>& storage) {
  storage.clear();
  storage.push_back(program);
  storage.insert(storage.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& arg : storage) argv.push_back(arg.data());
  argv.push_back(nullptr);
  return argv;
}

//! The exit code of a waitpid status: the code, or 128 + the signal.
int ExitCode(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

}  // namespace

std::string FindWorkerBinary(const std::string& self) {
  std::error_code error;
  const fs::path exe = fs::canonical(self.empty() ? "/proc/self/exe" : self, error);
  if (error) return {};
  const fs::path dir = exe.parent_path();
  for (const fs::path& candidate :
       {dir / "ios-worker", dir.parent_path() / "worker" / "ios-worker"}) {
    if (access(candidate.c_str(), X_OK) == 0) return candidate.string();
  }
  return {};
}

std::string CheckDeviceInWorker(const std::string& worker, const std::string& backend) {
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) return "cannot create a pipe to " + worker;
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], STDERR_FILENO);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  std::vector<std::string> storage;
  std::vector<char*> argv =
      Argv(worker, {"--backend", backend, "--check-device", "--log-level", "warn"}, storage);
  pid_t pid = -1;
  const int spawned = posix_spawn(&pid, worker.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(pipe_fds[1]);
  if (spawned != 0) {
    close(pipe_fds[0]);
    return "cannot start " + worker;
  }
  std::string said;
  char buffer[512];
  for (ssize_t n; (n = read(pipe_fds[0], buffer, sizeof buffer)) != 0;) {
    if (n < 0) {
      if (errno == EINTR) continue;
      break;
    }
    said.append(buffer, static_cast<size_t>(n));
  }
  close(pipe_fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (ExitCode(status) == 0) return {};
  // Its last line says why ("ios-worker: error: ...").
  while (!said.empty() && (said.back() == '\n' || said.back() == '\r')) said.pop_back();
  const size_t last = said.rfind('\n');
  std::string line = last == std::string::npos ? said : said.substr(last + 1);
  if (line.empty()) line = worker + " exited with status " + std::to_string(ExitCode(status));
  return line;
}

WorkerProcess::WorkerProcess(const std::string& worker, const std::vector<std::string>& args) {
  std::vector<std::string> storage;
  std::vector<char*> argv = Argv(worker, args, storage);
  if (posix_spawn(&pid_, worker.c_str(), nullptr, nullptr, argv.data(), environ) != 0) {
    pid_ = -1;
    throw Error("cannot start " + worker);
  }
}

std::optional<int> WorkerProcess::Exited() {
  if (status_ || pid_ < 0) return status_;
  int status = 0;
  if (waitpid(pid_, &status, WNOHANG) == pid_) status_ = ExitCode(status);
  return status_;
}

WorkerProcess::~WorkerProcess() {
  if (pid_ < 0 || Exited()) return;
  kill(pid_, SIGTERM);
  // The worker stops within its 100 ms stop check; give it a few seconds.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!Exited() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (!Exited()) {
    kill(pid_, SIGKILL);
    int status = 0;
    while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
  }
}

SupervisedWorker::SupervisedWorker(std::string worker, std::vector<std::string> args,
                                   int max_restarts)
    : worker_(std::move(worker)),
      args_(std::move(args)),
      max_restarts_(max_restarts),
      process_(std::make_unique<WorkerProcess>(worker_, args_)),
      watcher_([this] { Watch(); }) {}

SupervisedWorker::~SupervisedWorker() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  stop_.notify_all();
  watcher_.join();
  // process_ goes with the object: stopped and reaped by its destructor.
}

pid_t SupervisedWorker::pid() const {
  std::lock_guard lock(mutex_);
  return process_ ? process_->pid() : -1;
}

int SupervisedWorker::restarts() const {
  std::lock_guard lock(mutex_);
  return restarts_;
}

void SupervisedWorker::Watch() {
  std::unique_lock lock(mutex_);
  while (!stop_.wait_for(lock, std::chrono::milliseconds(100), [this] { return stopping_; })) {
    try {
      const std::optional<int> status = process_ ? process_->Exited() : std::nullopt;
      if (!status) continue;
      const pid_t old = process_->pid();
      if (restarts_ >= max_restarts_) {
        spdlog::error(
            "ios-worker process {} exited with status {}{}; not restarted ({} restarts already): "
            "what it held is measured again once the query timeout passes",
            old, *status, *status == worker::kExitMeasurementHung ? " (a measurement hung)" : "",
            restarts_);
        process_.reset();
        continue;
      }
      ++restarts_;
      process_ = std::make_unique<WorkerProcess>(worker_, args_);
      spdlog::warn(
          "ios-worker process {} exited with status {}{}; restarted as process {} ({} of {})", old,
          *status, *status == worker::kExitMeasurementHung ? " (a measurement hung)" : "",
          process_->pid(), restarts_, max_restarts_);
    } catch (const std::exception& e) {
      spdlog::error("supervising the ios-worker process: {}", e.what());
      process_.reset();
    }
  }
}

std::string LoopbackTo(const std::string& endpoint) {
  for (const std::string wildcard : {"tcp://*:", "tcp://0.0.0.0:"}) {
    if (endpoint.starts_with(wildcard)) {
      return "tcp://127.0.0.1:" + endpoint.substr(wildcard.size());
    }
  }
  return endpoint;
}

}  // namespace ios::coordinator
