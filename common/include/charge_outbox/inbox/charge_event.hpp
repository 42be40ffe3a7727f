// ChargeEvent: one event of the charge-events topic as a consumer reads it, and the parser that turns a
// Kafka message into one or says why it is not one. Both CloudEvents modes the relay publishes are read
// (binary: the attributes in ce_* headers; structured: one JSON object with the payload as `data`), so a
// topic can switch modes under a running consumer. Contract: docs/events.md.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace charge_outbox::inbox {

struct ChargeEvent {
  std::string event_id;                             // ce_id, a UUID: the same on every re-delivery
  std::string event_type;                           // ce_type, "payments.charge.captured.v1"
  std::chrono::system_clock::time_point event_time; // ce_time (the payload's updated_at)
  std::string charge_id;                            // the key, ce_subject, the payload's id
  int sequence = 0;                                 // the payload's sequence: 1, 2, ... per charge
  std::string payload;                              // the charge as JSON, as published
  int partition = -1;  // the Kafka partition it was read from (-1: unknown); every event of a charge is on one
  std::int64_t offset = -1;  // its offset there (-1: unknown, as for an event applied from the held set)
  // The Kafka record's timestamp (CreateTime or LogAppendTime, as the topic keeps it): what the topic's
  // retention counts from, and so what the inbox expires events by. None when the record carries none
  // (librdkafka's -1: a message format older than Kafka 0.10).
  std::optional<std::chrono::system_clock::time_point> record_time;
};

// A Kafka message as views; the caller keeps what they refer to alive while parsing.
struct MessageView {
  std::string_view key;
  std::string_view value;
  std::vector<std::pair<std::string_view, std::string_view>> headers;
  std::optional<std::chrono::system_clock::time_point> record_time;  // the record's timestamp, when it has one
};

struct ParsedMessage {
  enum class Kind {
    kEvent,         // a charge event of the major version read: `event` is set
    kOtherVersion,  // a well-formed charge event of another major version (a .v2 beside .v1): skip it
    kRejected,      // not a charge event this consumer can read: `rejection` says why
  };
  Kind kind = Kind::kRejected;
  std::optional<ChargeEvent> event;
  std::string rejection;  // for a person; names the attribute or field, never quotes the value
};

// The message as a charge event of the major version `major_suffix` (".v1"): the attributes present and
// well formed, the payload a JSON object whose id is the key and whose sequence is a positive integer.
ParsedMessage ParseChargeEvent(const MessageView& message, std::string_view major_suffix = ".v1");

}  // namespace charge_outbox::inbox
