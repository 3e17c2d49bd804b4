// What the default spdlog logger says while a CapturedLog lives: the farm's
// tests check the lines a person reads (refusals, handshake failures).
#pragma once

#include <spdlog/sinks/ringbuffer_sink.h>
#include <spdlog/spdlog.h>

#include <memory>
#include <string>
#include <vector>

namespace ios::net::testing {

class CapturedLog {
 public:
  CapturedLog()
      : sink_(std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(256)),
        previous_(spdlog::default_logger()) {
    spdlog::set_default_logger(std::make_shared<spdlog::logger>("captured", sink_));
  }
  ~CapturedLog() { spdlog::set_default_logger(previous_); }
  CapturedLog(const CapturedLog&) = delete;
  CapturedLog& operator=(const CapturedLog&) = delete;

  //! Every line, concatenated.
  std::string Text() const {
    std::string text;
    for (const std::string& line : sink_->last_formatted()) text += line;
    return text;
  }

  //! The lines holding `text`.
  std::vector<std::string> With(const std::string& text) const {
    std::vector<std::string> lines;
    for (const std::string& line : sink_->last_formatted()) {
      if (line.find(text) != std::string::npos) lines.push_back(line);
    }
    return lines;
  }

 private:
  std::shared_ptr<spdlog::sinks::ringbuffer_sink_mt> sink_;
  std::shared_ptr<spdlog::logger> previous_;
};

}  // namespace ios::net::testing
