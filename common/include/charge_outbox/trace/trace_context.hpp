// W3C Trace Context (traceparent): parsed from an incoming request, or started fresh, stored with the
// outbox events a request causes, and carried to Kafka, so one trace follows a charge from the HTTP
// request to every consumer.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace charge_outbox::trace {

struct TraceContext {
  std::string trace_id;  // 32 lower-case hex digits, not all zero
  std::string span_id;   // 16 lower-case hex digits, not all zero
  bool sampled = false;

  // "00-<trace_id>-<span_id>-<flags>"
  std::string ToTraceparent() const;
};

// Parses a traceparent header (version 00, or a later version read as 00 per the spec); nullopt if it is
// malformed, in which case the caller starts a new trace.
std::optional<TraceContext> ParseTraceparent(std::string_view header);

// A new trace with a random trace id and span id.
TraceContext NewTrace();

// The same trace, a new span: what this process's work on a request is.
TraceContext ChildOf(const TraceContext& parent);

}  // namespace charge_outbox::trace
