// ios-coordinator's own output while it searches (compiled into the tool,
// not the library): the progress line, and the line Ctrl-C gets.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "coordinator/search.h"

namespace ios::coordinator {

//! Progress of the measure phases on stderr: one line that rewrites itself
//! on a terminal, a plain line every few seconds otherwise (logs, CI). The
//! last line of a phase ends at 100% or says why it ended short (lazy
//! measurement skips the stages its bounds rule out). Also keeps the count
//! SayWhatIsKeptOnInterrupt reports. One thread calls it.
class ProgressPrinter {
 public:
  explicit ProgressPrinter(bool quiet);
  void operator()(const MeasureProgress& p);

 private:
  //! Lazy measurement has no known total: rounds, what was measured, and
  //! how far apart the bounded and the measured optimum still are.
  void PrintLazy(const MeasureProgress& p, std::chrono::steady_clock::time_point now);
  //! "[#######.............]  35%"
  static std::string Bar(double fraction);

  bool quiet_, tty_;
  bool printed_done_ = false;
  int64_t measured_before_ = 0;  // by the finished measure phases
  std::chrono::steady_clock::time_point last_{};
};

//! From now on SIGINT and SIGTERM print one line (the measurements made so
//! far are kept in `db`, how many at least, and that rerunning resumes)
//! and exit 128 + the signal (130 for Ctrl-C). Every measurement is
//! committed as it arrives, so exiting at once loses nothing. Call once,
//! from main's thread, after `db` opened.
void SayWhatIsKeptOnInterrupt(const std::string& db);

}  // namespace ios::coordinator
