// Captures the process's log lines (the real JSON formatter, into memory) for as long as it lives, so a
// unit test can assert what a line says and which trace id it carries. Restores stdout logging after.
#pragma once

#include <spdlog/sinks/ostream_sink.h>

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "charge_outbox/log/log.hpp"

namespace charge_outbox::testing {

class LogCapture {
 public:
  LogCapture() { log::Init("test", "debug", std::make_shared<spdlog::sinks::ostream_sink_mt>(out_, true)); }
  ~LogCapture() { log::Init("test"); }
  LogCapture(const LogCapture&) = delete;
  LogCapture& operator=(const LogCapture&) = delete;

  // Every line so far, parsed.
  std::vector<boost::json::object> Lines() const {
    std::vector<boost::json::object> lines;
    std::istringstream in(out_.str());
    for (std::string line; std::getline(in, line);) lines.push_back(boost::json::parse(line).as_object());
    return lines;
  }

  // The lines whose message contains `text`.
  std::vector<boost::json::object> LinesWith(const std::string& text) const {
    std::vector<boost::json::object> found;
    for (auto& line : Lines()) {
      if (std::string_view(line.at("msg").as_string()).find(text) != std::string_view::npos) found.push_back(line);
    }
    return found;
  }

  // The trace id a line carries, or "" if none.
  static std::string TraceIdOf(const boost::json::object& line) {
    const auto* id = line.if_contains("trace_id");
    return id == nullptr ? std::string() : std::string(id->as_string());
  }

 private:
  std::ostringstream out_;
};

}  // namespace charge_outbox::testing
