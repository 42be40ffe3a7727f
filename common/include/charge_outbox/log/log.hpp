// Logging: one JSON object per line on stdout, with level, component and the current trace id.
//
// Call Init() once at start-up; afterwards use spdlog's free functions (spdlog::info, ...) or
// the logger returned by Logger(). Never log secrets, API keys or payment method tokens: the
// formatter cannot tell them apart from any other text.
#pragma once

#include <string>
#include <string_view>

namespace charge_outbox::log {

// `level` is one of trace, debug, info, warn, error; anything else is refused by config first.
void Init(std::string_view component, std::string_view level = "info");

// Flushes buffered lines; call before a deliberate exit.
void Flush();

// Makes `trace_id` appear in every line this thread logs until the scope ends. Work that hops
// threads (Asio handlers) opens a new scope where it resumes.
class ScopedTraceId {
 public:
  explicit ScopedTraceId(std::string trace_id);
  ~ScopedTraceId();
  ScopedTraceId(const ScopedTraceId&) = delete;
  ScopedTraceId& operator=(const ScopedTraceId&) = delete;

 private:
  std::string previous_;
};

// The levels config accepts, for ConfigReader::Choice.
inline const char* const kLevels[] = {"trace", "debug", "info", "warn", "error"};

// Appends `text` to `out` as the inside of a JSON string (quotes not included).
void AppendJsonEscaped(std::string_view text, std::string& out);

}  // namespace charge_outbox::log
