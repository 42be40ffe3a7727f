// ParseChargeEvent: both CloudEvents modes the relay publishes read as the same event, every malformed
// message is rejected with a reason naming what is wrong, another major version is told apart, the
// record's timestamp is carried beside the event's own time, and a rejection never quotes the message (its
// payload can hold what must not reach a log).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "charge_outbox/inbox/charge_event.hpp"
#include "charge_outbox/util/time.hpp"

namespace charge_outbox::inbox {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using Kind = ParsedMessage::Kind;

constexpr const char* kId = "0b6f3c1e-8a4d-4f0e-9c2a-5d7e1f3a9b20";
constexpr const char* kType = "payments.charge.captured.v1";
constexpr const char* kTime = "2026-03-01T10:00:00.123Z";
constexpr const char* kPayload = R"({"id":"ch_1","sequence":2,"status":"captured","amount":1500})";

// A binary-mode message: attributes in ce_* headers, the payload as the value. Owns what its view
// refers to.
struct Binary {
  std::string key = "ch_1";
  std::string value = kPayload;
  std::vector<std::pair<std::string, std::string>> headers{{"ce_specversion", "1.0"},
                                                          {"ce_id", kId},
                                                          {"ce_type", kType},
                                                          {"ce_source", "/charge-outbox/charge-api"},
                                                          {"ce_time", kTime},
                                                          {"ce_subject", "ch_1"},
                                                          {"content-type", "application/json"}};
  std::optional<std::chrono::system_clock::time_point> record_time;

  Binary& Set(const std::string& name, std::string v) {
    for (auto& [k, old] : headers) {
      if (k == name) {
        old = std::move(v);
        return *this;
      }
    }
    headers.emplace_back(name, std::move(v));
    return *this;
  }
  Binary& Drop(const std::string& name) {
    std::erase_if(headers, [&](const auto& h) { return h.first == name; });
    return *this;
  }
  ParsedMessage Parse() const {
    MessageView view{.key = key, .value = value, .headers = {}, .record_time = record_time};
    for (const auto& [k, v] : headers) view.headers.emplace_back(k, v);
    return ParseChargeEvent(view);
  }
};

// A structured-mode message: one JSON object with the attributes and the payload as `data`.
ParsedMessage Structured(const std::string& value, const std::string& key = "ch_1",
                         const std::string& content_type = "application/cloudevents+json; charset=utf-8") {
  const std::vector<std::pair<std::string_view, std::string_view>> headers{{"content-type", content_type}};
  return ParseChargeEvent({.key = key, .value = value, .headers = headers});
}

std::string Envelope(const std::string& data, const std::string& type = kType, const std::string& id = kId) {
  return std::string(R"({"specversion":"1.0","id":")") + id + R"(","type":")" + type +
         R"(","source":"/charge-outbox/charge-api","subject":"ch_1","time":")" + kTime +
         R"(","datacontenttype":"application/json","data":)" + data + "}";
}

std::string WithPayload(int sequence_or_marker) { return R"({"id":"ch_1","sequence":)" + std::to_string(sequence_or_marker) + "}"; }

TEST(InboxChargeEventTest, BinaryModeReadsTheHeadersAndThePayload) {
  const auto parsed = Binary{}.Parse();
  ASSERT_EQ(parsed.kind, Kind::kEvent) << parsed.rejection;
  ASSERT_TRUE(parsed.event.has_value());
  const auto& e = *parsed.event;
  EXPECT_EQ(e.event_id, kId);
  EXPECT_EQ(e.event_type, kType);
  EXPECT_EQ(e.charge_id, "ch_1");
  EXPECT_EQ(e.sequence, 2);
  EXPECT_EQ(e.payload, kPayload);
  EXPECT_EQ(e.event_time, util::ParseRfc3339(kTime).value());
  EXPECT_EQ(util::ToUnixMicros(e.event_time) % 1'000'000, 123'000);
}

TEST(InboxChargeEventTest, StructuredModeGivesTheSameEvent) {
  const auto binary = Binary{}.Parse();
  const auto structured = Structured(Envelope(kPayload));
  ASSERT_EQ(structured.kind, Kind::kEvent) << structured.rejection;
  const auto& b = *binary.event;
  const auto& s = *structured.event;
  EXPECT_EQ(s.event_id, b.event_id);
  EXPECT_EQ(s.event_type, b.event_type);
  EXPECT_EQ(s.event_time, b.event_time);
  EXPECT_EQ(s.charge_id, b.charge_id);
  EXPECT_EQ(s.sequence, b.sequence);
  EXPECT_EQ(s.payload, b.payload);  // the data object, serialized as the relay wrote it
}

TEST(InboxChargeEventTest, StructuredModeIgnoresCeHeadersLeftOnTheMessage) {
  // A topic switched modes: stale binary headers beside a structured value; the value is the truth.
  const std::string value = Envelope(kPayload);
  const std::vector<std::pair<std::string_view, std::string_view>> headers{
      {"ce_id", "not-a-uuid"}, {"content-type", "application/cloudevents+json"}};
  const auto parsed = ParseChargeEvent({.key = "ch_1", .value = value, .headers = headers});
  ASSERT_EQ(parsed.kind, Kind::kEvent) << parsed.rejection;
  EXPECT_EQ(parsed.event->event_id, kId);
}

// The inbox expires events by their record's time (docs/inbox.md, "Retention"), so the event carries it,
// whatever its ce_time says; without one (an old message format) it carries none.
TEST(InboxChargeEventTest, TheRecordsTimestampIsCarriedBesideTheEventsOwnTime) {
  const auto published = util::ParseRfc3339("2026-03-15T08:30:00.250Z").value();
  Binary binary;
  binary.record_time = published;
  const auto parsed = binary.Parse();
  ASSERT_EQ(parsed.kind, Kind::kEvent) << parsed.rejection;
  EXPECT_EQ(parsed.event->record_time, published);
  EXPECT_EQ(parsed.event->event_time, util::ParseRfc3339(kTime).value());

  const std::string value = Envelope(kPayload);
  const std::vector<std::pair<std::string_view, std::string_view>> headers{
      {"content-type", "application/cloudevents+json"}};
  const auto structured =
      ParseChargeEvent({.key = "ch_1", .value = value, .headers = headers, .record_time = published});
  ASSERT_EQ(structured.kind, Kind::kEvent) << structured.rejection;
  EXPECT_EQ(structured.event->record_time, published);

  const auto without = Binary{}.Parse();
  ASSERT_EQ(without.kind, Kind::kEvent) << without.rejection;
  EXPECT_EQ(without.event->record_time, std::nullopt);
}

void ExpectRejected(const ParsedMessage& parsed, const std::string& names, const std::string& what) {
  EXPECT_EQ(parsed.kind, Kind::kRejected) << what;
  EXPECT_FALSE(parsed.event.has_value()) << what;
  EXPECT_THAT(parsed.rejection, HasSubstr(names)) << what;
}

TEST(InboxChargeEventTest, RejectsBadAttributesNamingThem) {
  ExpectRejected(Binary{}.Drop("ce_id").Parse(), "id", "no ce_id");
  ExpectRejected(Binary{}.Set("ce_id", "charge-42").Parse(), "id", "ce_id not a UUID");
  ExpectRejected(Binary{}.Set("ce_id", std::string(kId) + "0").Parse(), "id", "ce_id too long");
  ExpectRejected(Binary{}.Set("ce_id", "0b6f3c1e-8a4d-4f0e-9c2a-5d7e1f3a9bzz").Parse(), "id", "ce_id not hex");
  ExpectRejected(Binary{}.Drop("ce_time").Parse(), "time", "no ce_time");
  ExpectRejected(Binary{}.Set("ce_time", "yesterday").Parse(), "time", "ce_time not a date");
  ExpectRejected(Binary{}.Set("ce_time", "2026-13-01T10:00:00Z").Parse(), "time", "ce_time month 13");
  ExpectRejected(Binary{}.Set("ce_time", "2026-03-01 10:00:00").Parse(), "time", "ce_time without T and offset");
  ExpectRejected(Binary{}.Set("ce_time", "1969-12-31T23:59:59Z").Parse(), "time", "ce_time before 1970");
  ExpectRejected(Binary{}.Set("ce_specversion", "1").Parse(), "specversion", "specversion 1");
  ExpectRejected(Binary{}.Set("ce_specversion", "0.3").Parse(), "specversion", "specversion 0.3");
  ExpectRejected(Binary{}.Drop("ce_specversion").Parse(), "specversion", "no specversion");
  ExpectRejected(Binary{}.Set("ce_type", "payments.refund.created.v1").Parse(), "type", "not a charge type");
  ExpectRejected(Binary{}.Set("ce_type", "payments.charge.captured").Parse(), "type", "no major version");
  ExpectRejected(Binary{}.Drop("ce_type").Parse(), "type", "no ce_type");
}

TEST(InboxChargeEventTest, RejectsAKeyThatIsNotThePayloadsId) {
  Binary other_key;
  other_key.key = "ch_2";
  ExpectRejected(other_key.Parse(), "key", "key ch_2, payload id ch_1");
  Binary no_key;
  no_key.key = "";
  ExpectRejected(no_key.Parse(), "key", "no key");
  Binary no_id;
  no_id.value = R"({"sequence":1})";
  ExpectRejected(no_id.Parse(), "id", "payload without id");
  Binary numeric_id;
  numeric_id.value = R"({"id":1,"sequence":1})";
  ExpectRejected(numeric_id.Parse(), "id", "payload id a number");
}

TEST(InboxChargeEventTest, RejectsASequenceThatIsNotAPositiveInt) {
  for (const std::string sequence : {"0", "-1", "1.5", "\"2\"", "null", "true", "2147483648", "9223372036854775807",
                                      "18446744073709551615", "1e3"}) {
    Binary m;
    m.value = R"({"id":"ch_1","sequence":)" + sequence + "}";
    ExpectRejected(m.Parse(), "sequence", "sequence " + sequence);
  }
  Binary missing;
  missing.value = R"({"id":"ch_1"})";
  ExpectRejected(missing.Parse(), "sequence", "no sequence");

  Binary largest;
  largest.value = R"({"id":"ch_1","sequence":2147483647})";
  const auto parsed = largest.Parse();
  ASSERT_EQ(parsed.kind, Kind::kEvent) << parsed.rejection;
  EXPECT_EQ(parsed.event->sequence, 2147483647);
}

TEST(InboxChargeEventTest, RejectsAValueThatIsNotAJsonObject) {
  for (const std::string value : {"", "{", "not json", R"({"id":"ch_1","sequence":1} trailing)"}) {
    Binary m;
    m.value = value;
    ExpectRejected(m.Parse(), "JSON", "value " + value);
  }
  for (const std::string value : {"[1,2]", "\"ch_1\"", "42", "null"}) {
    Binary m;
    m.value = value;
    ExpectRejected(m.Parse(), "object", "value " + value);
  }
  ExpectRejected(Structured("[]"), "object", "structured array");
  ExpectRejected(Structured(R"({"specversion":"1.0","id":")" + std::string(kId) + R"("})"), "data", "structured without data");
  ExpectRejected(Structured(Envelope("[1]")), "object", "structured data an array");
  ExpectRejected(Structured("{"), "JSON", "structured not JSON");
}

TEST(InboxChargeEventTest, StructuredModeChecksTheSameRules) {
  ExpectRejected(Structured(Envelope(kPayload, kType, "nope")), "id", "structured id");
  ExpectRejected(Structured(Envelope(kPayload, "payments.refund.v1")), "type", "structured type");
  ExpectRejected(Structured(Envelope(kPayload), "ch_9"), "key", "structured key");
  ExpectRejected(Structured(Envelope(WithPayload(0))), "sequence", "structured sequence");
}

TEST(InboxChargeEventTest, AnotherMajorVersionIsToldApart) {
  const auto v2 = Binary{}.Set("ce_type", "payments.charge.captured.v2").Parse();
  EXPECT_EQ(v2.kind, Kind::kOtherVersion) << v2.rejection;
  EXPECT_FALSE(v2.event.has_value());

  const auto v2_structured = Structured(Envelope(kPayload, "payments.charge.captured.v2"));
  EXPECT_EQ(v2_structured.kind, Kind::kOtherVersion) << v2_structured.rejection;

  // A consumer built for .v2 reads it and skips .v1.
  Binary v2_message;
  v2_message.Set("ce_type", "payments.charge.captured.v2");
  MessageView view{.key = v2_message.key, .value = v2_message.value, .headers = {}};
  for (const auto& [k, v] : v2_message.headers) view.headers.emplace_back(k, v);
  EXPECT_EQ(ParseChargeEvent(view, ".v2").kind, Kind::kEvent);
  EXPECT_EQ(ParseChargeEvent(view, ".v1").kind, Kind::kOtherVersion);
}

TEST(InboxChargeEventTest, ARejectionNeverQuotesTheMessage) {
  const std::string pan = "4111111111111111";
  const std::string secret_payload = R"({"id":"ch_1","sequence":1,"card":")" + pan + R"("})";
  std::vector<std::pair<std::string, ParsedMessage>> cases;
  for (const auto& [what, value] : std::vector<std::pair<std::string, std::string>>{
           {"not JSON", pan + " " + secret_payload},
           {"id not the key", R"({"id":")" + pan + R"(","sequence":1})"},
           {"sequence a string", R"({"id":"ch_1","sequence":")" + pan + R"(","card":")" + pan + R"("})"},
           {"an array", "[\"" + pan + "\"]"}}) {
    Binary m;
    m.value = value;
    cases.emplace_back(what, m.Parse());
  }
  for (const auto& [attribute, value] : std::vector<std::pair<std::string, std::string>>{
           {"ce_id", pan}, {"ce_time", pan}, {"ce_type", "payments.charge." + pan}, {"ce_specversion", pan}}) {
    Binary m;
    m.value = secret_payload;
    m.Set(attribute, value);
    cases.emplace_back(attribute, m.Parse());
  }
  Binary card_key;
  card_key.key = pan;
  card_key.value = secret_payload;
  cases.emplace_back("key not the id", card_key.Parse());
  cases.emplace_back("structured data", Structured(Envelope("\"" + pan + "\"")));
  for (const auto& [what, parsed] : cases) {
    EXPECT_EQ(parsed.kind, Kind::kRejected) << what;
    EXPECT_FALSE(parsed.rejection.empty()) << what;
    EXPECT_THAT(parsed.rejection, Not(HasSubstr("4111"))) << what << ": " << parsed.rejection;
  }
}

}  // namespace
}  // namespace charge_outbox::inbox
