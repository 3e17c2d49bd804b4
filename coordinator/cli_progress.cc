#include "coordinator/cli_progress.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>

namespace ios::coordinator {
namespace {

// Ctrl-C (or SIGTERM) during a search: every measurement is committed as
// it arrives, so nothing is lost; the handler says so in one line and exits
// 128 + the signal. Signal handlers see only globals: the line's text is
// prepared before the handler is installed and the count is a lock-free
// atomic.

std::atomic<int64_t> g_measured_so_far{0};
// The line's start, written once before the handler is installed: a plain
// array, which no destructor can take from a late signal.
char g_interrupt_start[1024];
size_t g_interrupt_start_size = 0;
bool g_interrupt_keeps = true;  // false for an in-memory DB

void WriteAll(const char* text, size_t size) {
  while (size > 0) {
    const ssize_t n = ::write(STDERR_FILENO, text, size);
    if (n <= 0) return;
    text += n;
    size -= static_cast<size_t>(n);
  }
}

void OnInterrupt(int signal) {
  // Async-signal-safe only: write(2), _exit(2), no allocation, no stdio.
  char digits[24];
  int64_t value = g_measured_so_far.load();
  size_t at = sizeof digits;
  do {
    digits[--at] = static_cast<char>('0' + value % 10);
    value /= 10;
  } while (value > 0 && at > 0);
  constexpr char kMiddle[] = " (at least ";
  constexpr char kKept[] = " stages measured in this run); rerunning the same command resumes\n";
  constexpr char kLost[] = " stages measured in this run, not kept)\n";
  WriteAll(g_interrupt_start, g_interrupt_start_size);
  WriteAll(kMiddle, sizeof kMiddle - 1);
  WriteAll(digits + at, sizeof digits - at);
  if (g_interrupt_keeps) {
    WriteAll(kKept, sizeof kKept - 1);
  } else {
    WriteAll(kLost, sizeof kLost - 1);
  }
  ::_exit(128 + signal);  // 130 for Ctrl-C, as a shell reports a death by SIGINT
}

}  // namespace

void SayWhatIsKeptOnInterrupt(const std::string& db) {
  g_interrupt_keeps = db != ":memory:";
  const std::string start =
      g_interrupt_keeps
          ? "\nios-coordinator: interrupted; measurements kept in DB " + db
          : std::string("\nios-coordinator: interrupted; the DB is in memory (--db :memory:)");
  g_interrupt_start_size = std::min(start.size(), sizeof g_interrupt_start);
  std::copy_n(start.data(), g_interrupt_start_size, g_interrupt_start);
  struct sigaction action {};
  action.sa_handler = OnInterrupt;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
}

ProgressPrinter::ProgressPrinter(bool quiet) : quiet_(quiet), tty_(isatty(STDERR_FILENO) != 0) {}

void ProgressPrinter::operator()(const MeasureProgress& p) {
  g_measured_so_far.store(measured_before_ + p.measured);
  if (p.finished) measured_before_ += p.measured;
  if (quiet_) return;
  const auto now = std::chrono::steady_clock::now();
  if (p.lazy) {
    PrintLazy(p, now);
    return;
  }
  const bool done = p.finished || p.reused + p.measured >= p.total;
  if (done && printed_done_) return;
  if (!tty_ && !done && now - last_ < std::chrono::seconds(5)) return;
  printed_done_ = done;
  last_ = now;
  const int64_t remaining = p.total - p.reused - p.measured;
  const double rate = p.elapsed_s > 0 ? p.measured / p.elapsed_s : 0;
  const double eta = rate > 0 ? remaining / rate : 0;
  std::fprintf(stderr,
               "%smeasure %s %lld/%lld stages, measured %lld, reused %lld, failed %lld, "
               "%.0f/s, ETA %.0f s, %d worker%s%s",
               tty_ ? "\r" : "",
               Bar(p.total > 0 ? double(p.total - remaining) / p.total : 1).c_str(),
               static_cast<long long>(p.reused + p.measured), static_cast<long long>(p.total),
               static_cast<long long>(p.measured), static_cast<long long>(p.reused),
               static_cast<long long>(p.failed), rate, eta, p.workers, p.workers == 1 ? "" : "s",
               tty_ && !done ? "\x1b[K" : "\n");
  std::fflush(stderr);
}

void ProgressPrinter::PrintLazy(const MeasureProgress& p,
                                std::chrono::steady_clock::time_point now) {
  if (p.finished && printed_done_) return;
  if (!tty_ && !p.finished && now - last_ < std::chrono::seconds(5)) return;
  printed_done_ = p.finished;
  last_ = now;
  const double rate = p.elapsed_s > 0 ? p.measured / p.elapsed_s : 0;
  const double share = p.total > 0 ? 100.0 * (p.measured + p.reused) / p.total : 0;
  if (p.finished) {
    // Lazy measurement ends short of every candidate by design: the last
    // line says so, rather than stopping at some percentage unexplained.
    std::fprintf(stderr,
                 "%smeasure (lazy): done after %lld rounds: %lld of %lld candidate stages "
                 "(%.1f%%): measured %lld, reused %lld, failed %lld; the other %lld cannot "
                 "beat the schedule found (their lower bounds say so; docs/search-cost.md); "
                 "%lld below their bounds, %lld part%s measured in full%s\n",
                 tty_ ? "\r" : "", static_cast<long long>(p.rounds),
                 static_cast<long long>(p.measured + p.reused), static_cast<long long>(p.total),
                 share, static_cast<long long>(p.measured), static_cast<long long>(p.reused),
                 static_cast<long long>(p.failed),
                 static_cast<long long>(p.total - p.measured - p.reused),
                 static_cast<long long>(p.bound_violations),
                 static_cast<long long>(p.parts_measured_in_full),
                 p.parts_measured_in_full == 1 ? "" : "s", tty_ ? "\x1b[K" : "");
    std::fflush(stderr);
    return;
  }
  std::string gap = "-";
  if (p.rounds > 0 && std::isfinite(p.upper_ms) && p.upper_ms > 0) {
    char text[32];
    std::snprintf(text, sizeof text, "%.1f%%", 100 * (p.upper_ms - p.lower_ms) / p.upper_ms);
    gap = text;
  }
  std::fprintf(stderr,
               "%smeasure (lazy): round %lld, %lld of %lld candidate stages (%.1f%%): measured "
               "%lld, reused %lld, failed %lld; bound gap %s; %.0f/s, %d worker%s%s",
               tty_ ? "\r" : "", static_cast<long long>(p.rounds),
               static_cast<long long>(p.measured + p.reused), static_cast<long long>(p.total),
               share, static_cast<long long>(p.measured), static_cast<long long>(p.reused),
               static_cast<long long>(p.failed), gap.c_str(), rate, p.workers,
               p.workers == 1 ? "" : "s", tty_ && !p.finished ? "\x1b[K" : "\n");
  std::fflush(stderr);
}

std::string ProgressPrinter::Bar(double fraction) {
  constexpr int kWidth = 24;
  const int filled = static_cast<int>(std::clamp(fraction, 0.0, 1.0) * kWidth);
  char percent[8];
  std::snprintf(percent, sizeof percent, "%3d%%", static_cast<int>(fraction * 100));
  return "[" + std::string(static_cast<size_t>(filled), '#') +
         std::string(static_cast<size_t>(kWidth - filled), '.') + "] " + percent;
}

}  // namespace ios::coordinator
