// Logging: one JSON object per line on stdout, with level, component and the current trace id.
//
// Call Init() once at start-up; afterwards use spdlog's free functions (spdlog::info, ...) or
// the logger returned by Logger(). Never log secrets, API keys or payment method tokens: the
// formatter cannot tell them apart from any other text.
#pragma once

#include <spdlog/spdlog.h>

#include <memory>
#include <string>
#include <string_view>
#include <utility>

namespace charge_outbox::log {

// `level` is one of trace, debug, info, warn, error; anything else is refused by config first.
void Init(std::string_view component, std::string_view level = "info");

// Like Init, but the lines go to `sink` instead of stdout (a test reads them back).
void Init(std::string_view component, std::string_view level, std::shared_ptr<spdlog::sinks::sink> sink);

// Flushes buffered lines; call before a deliberate exit.
void Flush();

// Makes `trace_id` appear in every line this thread logs until the scope ends; an empty one makes lines
// carry none. The id is the thread's, not a coroutine's: a scope must never be held across a co_await
// (a suspended request would lend its id to whatever runs on the thread meanwhile). WithTrace is the
// usual way to use it.
class ScopedTraceId {
 public:
  explicit ScopedTraceId(std::string trace_id);
  ~ScopedTraceId();
  ScopedTraceId(const ScopedTraceId&) = delete;
  ScopedTraceId& operator=(const ScopedTraceId&) = delete;

 private:
  std::string previous_;
};

// Logs one line carrying `trace_id` (none if empty), whatever trace id the thread holds: how work that
// carries its trace context explicitly (a request, a reconciler run on a charge, a relay event) logs.
template <typename... Args>
void WithTrace(std::string trace_id, spdlog::level::level_enum level, spdlog::format_string_t<Args...> format,
               Args&&... args) {
  ScopedTraceId scope(std::move(trace_id));
  spdlog::log(level, format, std::forward<Args>(args)...);
}

// The trace id of a traceparent header value, or "" if it is empty or malformed: the trace a charge's
// or an event's stored traceparent puts the work on it in.
std::string TraceIdOf(std::string_view traceparent);

// The levels config accepts, for ConfigReader::Choice.
inline const char* const kLevels[] = {"trace", "debug", "info", "warn", "error"};

// Appends `text` to `out` as the inside of a JSON string (quotes not included).
void AppendJsonEscaped(std::string_view text, std::string& out);

}  // namespace charge_outbox::log
