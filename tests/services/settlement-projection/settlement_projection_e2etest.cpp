// settlement-projection against the real broker, the real relay and PostgreSQL: re-deliveries from a
// crashing relay, a consumer killed between its database commit and its offset commit, a rebalance
// between two instances with one killed, and events arriving out of order across a gap. Every test ends
// by comparing the projection with its source, exactly: a duplicate applied twice, an event skipped or
// applied out of order shows up as a wrong count or amount, or a wrong last sequence. And events expired by
// their record's timestamp, not by their own time.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <boost/json/serialize.hpp>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <csignal>
#include <cstdio>
#include <thread>

#include "charge_outbox/util/sha256.hpp"
#include "charge_outbox/util/time.hpp"
#include "http_test_client.hpp"
#include "projection_fixture.hpp"
#include "test_env.hpp"

namespace charge_outbox::testing {
namespace {

using namespace std::chrono_literals;

constexpr const char* kApplied = R"(inbox_events_total{outcome="applied"})";
constexpr const char* kDuplicate = R"(inbox_events_total{outcome="duplicate"})";
constexpr const char* kHeld = R"(inbox_events_total{outcome="held"})";
constexpr const char* kReleased = R"(inbox_events_total{outcome="released"})";
constexpr const char* kRejected = R"(inbox_events_total{outcome="rejected"})";
constexpr const char* kExpired = R"(inbox_events_total{outcome="expired"})";
constexpr const char* kAssigned = "inbox_assigned_partitions";

std::string TestName() { return ::testing::UnitTest::GetInstance()->current_test_info()->name(); }

class SettlementProjectionE2E : public ::testing::Test {
 protected:
  void SetUp() override { fixture_ = std::make_unique<ProjectionE2E>(TestName()); }
  ProjectionE2E& f() { return *fixture_; }

  // Relays with the crash failpoint, each publishing its first batch and dying before marking it.
  void CrashRelay(int times) {
    for (int i = 0; i < times; ++i) {
      auto relay = f().source().StartRelay({{"FAILPOINTS", "relay.after_publish_before_mark=crash"}, {"RELAY_BATCH_SIZE", "100"}});
      const auto crashed = relay->process().Wait(30s);
      ASSERT_EQ(crashed.term_signal, SIGKILL) << crashed.out << crashed.err;
    }
  }

  std::unique_ptr<ProjectionE2E> fixture_;
};

TEST_F(SettlementProjectionE2E, EventsTheRelayRedeliversAfterCrashesAreAppliedOnce) {
  const auto merchants = f().AddMerchants(4);
  auto projection = f().StartProjection({{"INBOX_BATCH_SIZE", "100"}});
  int written = 0;
  for (int wave = 0; wave < 2; ++wave) {
    written += f().WriteCharges(merchants, 150);
    // Each crashed relay sent the oldest 100 unmarked events; the next one sends them again, and the
    // one that drains sends them a third time, after the projection may have applied later events.
    ASSERT_NO_FATAL_FAILURE(CrashRelay(2));
    f().DrainOutbox(30s);
  }
  ASSERT_TRUE(f().WaitCaughtUp(30s)) << projection->Output();
  ASSERT_TRUE(Eventually([&] { return f().OffsetsCommitted(); }, 10s));
  EXPECT_GE(Metric(*projection, kDuplicate), 200.0) << "each wave's first 100 events arrived at least three times";
  EXPECT_EQ(Metric(*projection, kApplied), written) << "every event applied once";
  std::printf("events applied %.0f, duplicates %.0f\n", Metric(*projection, kApplied), Metric(*projection, kDuplicate));
  EXPECT_EQ(Metric(*projection, kRejected), 0.0);
  f().ExpectProjectionMatchesSource();
}

TEST_F(SettlementProjectionE2E, AConsumerKilledBetweenItsCommitAndItsOffsetCommitAppliesNothingTwice) {
  const auto merchants = f().AddMerchants(3);
  const int written = f().WriteCharges(merchants, 300);
  f().DrainOutbox(30s);

  // Dies right after its first batch's transaction committed, before Kafka hears of it. A short session
  // timeout: the dead member's partitions go to the restarted one sooner.
  const EnvChanges env{{"INBOX_BATCH_SIZE", "50"}, {"KAFKA_SESSION_TIMEOUT", "6s"}};
  auto with_failpoint = env;
  with_failpoint["FAILPOINTS"] = "inbox.after_commit_before_offset_commit=crash";
  auto crashing = f().StartProjectionProcess(with_failpoint);
  const auto crashed = crashing.Wait(30s);
  ASSERT_EQ(crashed.term_signal, SIGKILL) << crashed.out << crashed.err;
  const auto committed = std::stoll(f().projection_db().Scalar("SELECT count(*) FROM inbox"));
  ASSERT_GT(committed, 0) << "the first batch was committed before the crash";
  ASSERT_FALSE(f().CaughtUp());

  auto projection = f().StartProjection(env);
  ASSERT_TRUE(f().WaitCaughtUp(30s)) << projection->Output();
  ASSERT_TRUE(Eventually([&] { return f().OffsetsCommitted(); }, 10s));
  // The batch whose offsets were never committed came again, and was recognised: nothing of what was
  // committed to the database before the crash can come again as anything but a duplicate.
  const auto duplicates = Metric(*projection, kDuplicate);
  EXPECT_GT(duplicates, 0.0);
  EXPECT_LE(duplicates, static_cast<double>(committed));
  EXPECT_EQ(Metric(*projection, kApplied) + static_cast<double>(committed), written) << "every event applied once";
  std::printf("committed before the crash %lld events, duplicates after the restart %.0f, applied %.0f\n",
              static_cast<long long>(committed), duplicates, Metric(*projection, kApplied));
  f().ExpectProjectionMatchesSource();
}

TEST_F(SettlementProjectionE2E, ARebalanceBetweenTwoInstancesAndOneKilledLoseAndRepeatNothing) {
  const auto merchants = f().AddMerchants(5);
  const EnvChanges env{{"INBOX_BATCH_SIZE", "50"}, {"KAFKA_SESSION_TIMEOUT", "6s"}};
  auto a = f().StartProjection(env);
  ASSERT_TRUE(Eventually([&] { return Metric(*a, kAssigned) > 0; }, 20s)) << a->Output();

  auto relay = f().source().StartRelay();
  std::atomic<bool> writing{true};
  std::thread writer([&] {
    for (int wave = 0; wave < 12; ++wave) {
      f().WriteCharges(merchants, 60);
      std::this_thread::sleep_for(300ms);
    }
    writing = false;
  });
  // Mid-stream: B joins and the partitions are split.
  const bool a_applying = Eventually([&] { return Metric(*a, kApplied) >= 100.0; }, 20s);
  auto b = f().StartProjection(env);
  const bool split = Eventually([&] { return Metric(*a, kAssigned) > 0 && Metric(*b, kAssigned) > 0; }, 20s);
  const bool b_applying = Eventually([&] { return Metric(*b, kApplied) > 0; }, 20s);
  const bool still_writing = writing.load();
  // A dies holding partitions, with more events coming; B takes them over after the session timeout.
  a->process().Signal(SIGKILL);
  const auto killed = a->process().Wait(10s);
  writer.join();
  ASSERT_TRUE(a_applying) << a->Output();
  ASSERT_TRUE(split) << a->Output() << b->Output();
  ASSERT_TRUE(b_applying) << b->Output();
  EXPECT_TRUE(still_writing) << "A was killed after the last wave: not mid-stream";
  EXPECT_EQ(killed.term_signal, SIGKILL);

  ASSERT_TRUE(Eventually([&] { return Unpublished(f().source_db()) == 0; }, 30s)) << relay->Output();
  // B takes A's partitions over after A's session timed out.
  ASSERT_TRUE(f().WaitCaughtUp(40s)) << b->Output();
  std::printf("B applied %.0f events, %.0f duplicates\n", Metric(*b, kApplied), Metric(*b, kDuplicate));
  f().ExpectProjectionMatchesSource();
}

// The topic switched from binary to structured mode under a running consumer (docs/events.md): both read.
TEST_F(SettlementProjectionE2E, ATopicSwitchedToStructuredModeUnderTheConsumerIsReadAlike) {
  const auto merchants = f().AddMerchants(3);
  auto projection = f().StartProjection();
  f().WriteCharges(merchants, 100);
  f().DrainOutbox(30s);
  f().WriteCharges(merchants, 100);
  f().DrainOutbox(30s, {{"CLOUDEVENTS_MODE", "structured"}});
  const auto structured = ConsumeTopicUntil(
      f().source().topic().bootstrap_servers(), f().source().topic().name(),
      [](const ConsumedMessage& m) { return m.headers.contains("content-type") && m.headers.at("content-type") == "application/cloudevents+json"; },
      15s);
  ASSERT_FALSE(structured.empty());
  ASSERT_EQ(structured.back().headers.at("content-type"), "application/cloudevents+json") << "the relay never switched";
  ASSERT_TRUE(f().WaitCaughtUp(30s)) << projection->Output();
  ASSERT_TRUE(Eventually([&] { return f().OffsetsCommitted(); }, 10s));
  EXPECT_EQ(Metric(*projection, kRejected), 0.0);
  EXPECT_EQ(Metric(*projection, kDuplicate), 0.0);
  f().ExpectProjectionMatchesSource();
}

// inbox_assigned_partitions is the instance's: what an operator sums over the group to see that every
// partition has an owner.
TEST_F(SettlementProjectionE2E, TheAssignedPartitionsGaugeCountsTheWholeInstance) {
  const EnvChanges env{{"KAFKA_SESSION_TIMEOUT", "6s"}};
  auto a = f().StartProjection(env);
  EXPECT_TRUE(Eventually([&] { return Metric(*a, kAssigned) == 6.0; }, 15s))
      << "a lone instance owns all 6 partitions; its gauge says " << Metric(*a, kAssigned) << "\n" << a->Output();
  auto b = f().StartProjection(env);
  EXPECT_TRUE(Eventually(
      [&] { return Metric(*a, kAssigned) > 0 && Metric(*b, kAssigned) > 0 && Metric(*a, kAssigned) + Metric(*b, kAssigned) == 6.0; },
      20s))
      << "two instances share the 6 partitions; their gauges say " << Metric(*a, kAssigned) << " and " << Metric(*b, kAssigned);
}

// Messages produced straight to the topic, in the relay's binary mode, for orders the relay never makes.
class SettlementProjectionOutOfOrderE2E : public SettlementProjectionE2E {
 protected:
  struct Charge {
    std::string id = ChargeId(NewUuid());
    std::string merchant = NewUuid();
    std::int64_t amount = 0;
    std::string currency = "EUR";
  };

  // Sends event `sequence` of `c` with status `status` at `time`, in a record stamped `record_time` (now
  // when none); returns its ce_id.
  std::string Produce(const Charge& c, int sequence, const std::string& status, std::chrono::system_clock::time_point time,
                      std::string event_id = NewUuid(),
                      std::optional<std::chrono::system_clock::time_point> record_time = std::nullopt) {
    const auto at = util::FormatRfc3339(time);
    const boost::json::object payload{{"id", c.id},           {"merchant_id", c.merchant}, {"order_id", "order-1"},
                                      {"amount", c.amount},   {"currency", c.currency},    {"status", status},
                                      {"sequence", sequence}, {"created_at", at},          {"updated_at", at}};
    const std::string type = status == "pending" ? "initiated" : status;
    f().source().topic().Produce(c.id, boost::json::serialize(payload),
                                 {{"ce_specversion", "1.0"},
                                  {"ce_id", event_id},
                                  {"ce_source", "/charge-outbox/charge-api"},
                                  {"ce_type", "payments.charge." + type + ".v1"},
                                  {"ce_time", at},
                                  {"ce_subject", c.id},
                                  {"content-type", "application/json"}},
                                 record_time);
    return event_id;
  }

  int Progress(const Charge& c) {
    const auto s = f().projection_db().Scalar("SELECT last_sequence FROM inbox_charges WHERE charge_id = '" + c.id + "'");
    return s.empty() ? 0 : std::stoi(s);
  }
  bool Held(const Charge& c, int sequence) {
    return f().projection_db().Scalar("SELECT count(*) FROM inbox_held WHERE charge_id = '" + c.id +
                                      "' AND sequence = " + std::to_string(sequence)) == "1";
  }
  static std::string Day(std::chrono::system_clock::time_point t) { return util::FormatRfc3339(t).substr(0, 10); }

  std::unique_ptr<ServiceProcess> Start(const EnvChanges& env) {
    auto p = f().StartProjection(env);
    EXPECT_TRUE(Eventually([&] { return Metric(*p, kAssigned) > 0; }, 20s)) << p->Output();
    return p;
  }
};

TEST_F(SettlementProjectionOutOfOrderE2E, EventsAheadOfTheirPredecessorsAreHeldThenAppliedInOrder) {
  auto projection = Start({{"INBOX_GAPS_WAIT", "60s"}});
  const auto now = std::chrono::system_clock::now();
  const auto yesterday = now - 26h;

  // X: its capture (2) arrives before its initiation (1).
  Charge x{.amount = 1'000};
  const auto x2 = Produce(x, 2, "captured", yesterday + 1s);
  ASSERT_TRUE(Eventually([&] { return Held(x, 2); }, 10s)) << projection->Output();
  const auto x1 = Produce(x, 1, "pending", yesterday);
  ASSERT_TRUE(Eventually([&] { return Progress(x) == 2; }, 10s));

  // Y: 3 (flagged for review), 1, 2 (captured): applied 1, 2, 3, it ends out of the totals. Applied
  // as they came, the capture would come last and count.
  Charge y{.merchant = x.merchant, .amount = 2'000};
  Produce(y, 3, "needs_review", now);
  ASSERT_TRUE(Eventually([&] { return Held(y, 3); }, 10s));
  Produce(y, 1, "pending", now - 2s);
  ASSERT_TRUE(Eventually([&] { return Progress(y) == 1; }, 10s));
  EXPECT_TRUE(Held(y, 3)) << "3 still waits for 2";
  Produce(y, 2, "captured", now - 1s);
  ASSERT_TRUE(Eventually([&] { return Progress(y) == 3; }, 10s));

  // Re-deliveries of X (same ce_id), out of place: applied again, the initiation would leave X pending.
  // Then a message that is not JSON on W's partition, before W's events.
  Produce(x, 2, "captured", yesterday + 1s, x2);
  Produce(x, 1, "pending", yesterday, x1);
  Charge w{.amount = 3'000, .currency = "USD"};
  f().source().topic().Produce(w.id, "not json {", {{"ce_id", NewUuid()}});
  Produce(w, 1, "pending", now - 1s);
  Produce(w, 2, "captured", now);
  ASSERT_TRUE(Eventually([&] { return Progress(w) == 2; }, 10s)) << "the garbage blocked the partition";
  // Not fatal: a broken inbox never counts them, and the totals below then say what it did instead.
  Eventually([&] { return f().OffsetsCommitted() && Metric(*projection, kDuplicate) >= 2.0; }, 10s);

  EXPECT_EQ(Metric(*projection, kDuplicate), 2.0);
  EXPECT_EQ(Metric(*projection, kApplied), 7.0);
  EXPECT_EQ(Metric(*projection, kHeld), 2.0);
  EXPECT_EQ(Metric(*projection, kReleased), 2.0);
  EXPECT_EQ(Metric(*projection, kRejected), 1.0);
  EXPECT_EQ(Metric(*projection, "inbox_gaps_total"), 0.0);
  EXPECT_EQ(f().projection_db().Scalar("SELECT count(*) FROM inbox_gaps"), "0");
  EXPECT_EQ(f().projection_db().Scalar("SELECT count(*) FROM inbox_held"), "0");
  EXPECT_EQ(f().projection_db().Scalar("SELECT message_key || ' ' || reason FROM inbox_rejected"),
            w.id + " the value is not JSON");

  EXPECT_EQ(ProjectionTotals(f().projection_db()),
            (TotalsByKey{{TotalsKey(x.merchant, Day(yesterday + 1s), "EUR"), {1, 1'000}},
                         {TotalsKey(w.merchant, Day(now), "USD"), {1, 3'000}}}));
  EXPECT_EQ(InboxProgress(f().projection_db()), (std::map<std::string, int>{{x.id, 2}, {y.id, 3}, {w.id, 2}}));

  // The same, as the API tells it.
  HttpTestClient api(ApiPort(*projection));
  const auto r = api.Get("/v1/merchants/" + x.merchant + "/captured-totals?from=" + Day(yesterday) + "&to=" + Day(now),
                         BearerHeader());
  ASSERT_EQ(r.status(), 200u) << r.response.body();
  const auto days = r.json().at("days").as_array();
  ASSERT_EQ(days.size(), 1u) << r.response.body();
  EXPECT_EQ(days[0].at("captured_count").as_int64(), 1);
  EXPECT_EQ(days[0].at("captured_amount").as_int64(), 1'000);
  const auto bad = api.Get("/v1/merchants/" + x.merchant + "/captured-totals?from=2026-02-30", BearerHeader());
  EXPECT_EQ(bad.status(), 400u);
  EXPECT_EQ(bad.header("content-type"), "application/problem+json");
  EXPECT_EQ(bad.json().at("field").as_string(), "from") << bad.response.body();
}

TEST_F(SettlementProjectionOutOfOrderE2E, UnderTheApplyPolicyAGapIsAppliedPastAfterTheWaitAndRecorded) {
  auto projection = Start({{"INBOX_GAPS_WAIT", "1s"}, {"INBOX_GAPS_POLICY", "apply"}});
  const auto now = std::chrono::system_clock::now();
  // Z: 1 and 3; 2 never comes (a skipped poison event).
  Charge z{.amount = 777};
  Produce(z, 1, "pending", now - 2s);
  const auto z3 = Produce(z, 3, "captured", now);
  const auto produced = std::chrono::steady_clock::now();
  ASSERT_TRUE(Eventually([&] { return Progress(z) == 3; }, 10s)) << projection->Output();
  EXPECT_GE(std::chrono::steady_clock::now() - produced, 900ms) << "applied past the gap before the wait";
  ASSERT_TRUE(Eventually([&] { return Metric(*projection, "inbox_gaps_total") == 1.0; }, 5s));
  EXPECT_EQ(f().projection_db().Scalar("SELECT after_sequence || '-' || before_sequence || ' ' || event_id FROM inbox_gaps"
                                       " WHERE charge_id = '" + z.id + "'"),
            "1-3 " + z3);
  EXPECT_EQ(Metric(*projection, kHeld), 1.0);
  EXPECT_EQ(Metric(*projection, kReleased), 1.0);
  ASSERT_TRUE(Eventually([&] { return Metric(*projection, "inbox_held_events") == 0.0; }, 5s));
  EXPECT_EQ(ProjectionTotals(f().projection_db()), (TotalsByKey{{TotalsKey(z.merchant, Day(now), "EUR"), {1, 777}}}));
  EXPECT_EQ(InboxProgress(f().projection_db()), (std::map<std::string, int>{{z.id, 3}}));
}

TEST_F(SettlementProjectionOutOfOrderE2E, UnderTheHoldPolicyAGapStaysHeld) {
  auto projection = Start({{"INBOX_GAPS_WAIT", "200ms"}, {"INBOX_GAPS_POLICY", "hold"}});
  const auto now = std::chrono::system_clock::now();
  Charge z{.amount = 777};
  Charge v{.amount = 500};  // an ordinary charge beside it
  Produce(z, 1, "pending", now - 2s);
  Produce(z, 3, "captured", now);
  Produce(v, 1, "pending", now - 1s);
  Produce(v, 2, "captured", now);
  ASSERT_TRUE(Eventually([&] { return Metric(*projection, "inbox_held_events") == 1.0 && Progress(v) == 2; }, 10s))
      << projection->Output();
  // Many sweeps and five times the wait later, it still waits for a person.
  std::this_thread::sleep_for(1s);
  EXPECT_EQ(Metric(*projection, "inbox_held_events"), 1.0);
  EXPECT_TRUE(Held(z, 3));
  EXPECT_EQ(Metric(*projection, "inbox_gaps_total"), 0.0);
  EXPECT_EQ(f().projection_db().Scalar("SELECT count(*) FROM inbox_gaps"), "0");
  EXPECT_EQ(ProjectionTotals(f().projection_db()), (TotalsByKey{{TotalsKey(v.merchant, Day(now), "EUR"), {1, 500}}}));
  EXPECT_EQ(InboxProgress(f().projection_db()), (std::map<std::string, int>{{z.id, 1}, {v.id, 2}}));
}

// Issue 41: the inbox expires an event by its record's timestamp, as the topic's retention does, not by
// its ce_time. A charge whose events are published days after they happened (parked, then retried; or
// read from the start by a new group) is applied; a charge whose records are themselves older than the
// inbox's window is not, and is left for a person in inbox_expired, with its gauge, not only counted.
TEST_F(SettlementProjectionOutOfOrderE2E, EventsExpireByTheirRecordsTimeNotByTheirOwn) {
  auto projection = Start({{"INBOX_RETENTION_DAYS", "1"}});
  const auto now = std::chrono::system_clock::now();
  Charge late{.amount = 1'500};
  Produce(late, 1, "pending", now - 72h);
  Produce(late, 2, "captured", now - 72h + 1s);
  Charge old{.merchant = late.merchant, .amount = 2'500};
  const auto old1 = Produce(old, 1, "pending", now - 50h, NewUuid(), now - 49h);
  const auto old2 = Produce(old, 2, "captured", now - 50h + 1s, NewUuid(), now - 49h);
  ASSERT_TRUE(Eventually([&] { return Progress(late) == 2 && Metric(*projection, "inbox_expired_events") == 2.0; }, 10s))
      << projection->Output();

  EXPECT_EQ(Metric(*projection, kApplied), 2.0);
  EXPECT_EQ(Metric(*projection, kExpired), 2.0);
  EXPECT_EQ(Progress(old), 0);
  EXPECT_EQ(f().projection_db().Scalar("SELECT string_agg(event_id || ' ' || charge_id || ' ' || sequence, ',' ORDER BY"
                                       " sequence) FROM inbox_expired WHERE record_time < now() - interval '48 hours'"),
            old1 + " " + old.id + " 1," + old2 + " " + old.id + " 2");
  EXPECT_EQ(ProjectionTotals(f().projection_db()),
            (TotalsByKey{{TotalsKey(late.merchant, Day(now - 72h + 1s), "EUR"), {1, 1'500}}}));
  EXPECT_EQ(InboxProgress(f().projection_db()), (std::map<std::string, int>{{late.id, 2}}));
}


// The query API answers only requests that present an accepted bearer token (http.token_hashes holds the
// tokens' SHA-256); two hashes at once let a new token be handed out before the old one is withdrawn. The
// admin port is not the API: probes and scrapes carry no token.
class SettlementProjectionApiE2E : public SettlementProjectionE2E {
 protected:
  static constexpr const char* kTotals = "/v1/merchants/00000000-0000-4000-8000-000000000001/captured-totals";
};

TEST_F(SettlementProjectionApiE2E, OnlyAnAcceptedBearerTokenIsAnsweredAndTwoOverlapForARotation) {
  const std::string old_token = "rotation-old-4f1c9a";
  const std::string new_token = "rotation-new-Zm9vYmFy+/=";
  // Either case, spaces around the comma: as an operator pastes two sha256sum outputs.
  std::string upper = util::Sha256Hex(new_token);
  std::transform(upper.begin(), upper.end(), upper.begin(), [](unsigned char c) { return std::toupper(c); });
  auto projection = f().StartProjection({{"HTTP_TOKEN_HASHES", util::Sha256Hex(old_token) + " , " + upper}});
  HttpTestClient api(ApiPort(*projection));

  struct Refused {
    const char* what;
    HttpHeaders headers;
    std::string target;
    const char* type;
    const char* challenge;
  };
  const std::string kInvalid = R"(Bearer error="invalid_token", error_description=")";
  const std::vector<Refused> refused{
      {"no Authorization", {}, kTotals, "token-missing", "Bearer"},
      {"a blank one", {{"Authorization", "  "}}, kTotals, "token-missing", "Bearer"},
      {"another scheme", {{"Authorization", "Basic " + old_token}}, kTotals, "token-malformed", "Bearer"},
      {"Bearer and nothing", {{"Authorization", "Bearer"}}, kTotals, "token-malformed", ""},
      {"not a b64token", {{"Authorization", "Bearer tok@n"}}, kTotals, "token-malformed", ""},
      {"two words", {{"Authorization", "Bearer " + old_token + " x"}}, kTotals, "token-malformed", ""},
      {"too long", {{"Authorization", "Bearer " + std::string(513, 'a')}}, kTotals, "token-malformed", ""},
      {"unknown", {{"Authorization", "Bearer " + old_token + "x"}}, kTotals, "token-unknown", ""},
      {"the hash itself", {{"Authorization", "Bearer " + util::Sha256Hex(old_token)}}, kTotals, "token-unknown", ""},
      {"the fixture's token, not configured here", BearerHeader(), kTotals, "token-unknown", ""},
      {"no route, no token", {}, "/nowhere", "token-missing", "Bearer"},
      {"a POST, unknown token", {{"Authorization", "Bearer nope"}}, kTotals, "token-unknown", ""},
  };
  for (const auto& c : refused) {
    const auto r = std::string(c.what).starts_with("a POST") ? api.Post(c.target, "{}", c.headers) : api.Get(c.target, c.headers);
    ASSERT_TRUE(r.ok()) << c.what << ": " << r.error.message();
    EXPECT_EQ(r.status(), 401u) << c.what << ": " << r.response.body();
    EXPECT_EQ(r.header("content-type"), "application/problem+json") << c.what;
    EXPECT_EQ(r.json().at("type").as_string(), std::string("urn:charge-outbox:problem:") + c.type) << c.what;
    EXPECT_EQ(r.json().at("status").as_int64(), 401) << c.what;
    const auto challenge = r.header("WWW-Authenticate");
    if (*c.challenge != '\0') {
      EXPECT_EQ(challenge, c.challenge) << c.what;
    } else {
      EXPECT_TRUE(challenge.starts_with(kInvalid)) << c.what << ": " << challenge;
    }
    EXPECT_EQ(r.response.body().find(old_token), std::string::npos) << c.what << ": the answer repeats a token";
  }

  // Both tokens of the rotation are answered, the scheme's case is free; the query is then judged as before.
  for (const auto& token : {old_token, new_token}) {
    const auto r = api.Get(std::string(kTotals) + "?from=2026-12-01&to=2026-12-02", {{"Authorization", "bearer " + token}});
    ASSERT_EQ(r.status(), 200u) << token << ": " << r.response.body();
    EXPECT_EQ(r.json().at("merchant_id").as_string(), "00000000-0000-4000-8000-000000000001");
    EXPECT_TRUE(r.json().at("days").as_array().empty()) << r.response.body();
    const auto bad = api.Get(std::string(kTotals) + "?from=x", BearerHeader(token));
    EXPECT_EQ(bad.status(), 400u) << bad.response.body();
    const auto lost = api.Get("/nowhere", BearerHeader(token));
    EXPECT_EQ(lost.status(), 404u) << lost.response.body();
  }

  // The admin port asks for nothing.
  HttpTestClient admin(projection->admin_port());
  EXPECT_EQ(admin.Get("/readyz").status(), 200u);
  EXPECT_EQ(admin.Get("/healthz").status(), 200u);
  EXPECT_EQ(admin.Get("/metrics").status(), 200u);
}

// With no token hash the daemon does not serve (exit 2 naming the key); `migrate` needs none. A token
// pasted where its hash belongs is refused without being repeated.
TEST_F(SettlementProjectionApiE2E, WithoutATokenHashTheDaemonRefusesToStart) {
  const std::string pasted_token = "a-real-token-pasted-by-mistake";
  for (const EnvChanges& env : {EnvChanges{{"HTTP_TOKEN_HASHES", std::nullopt}}, EnvChanges{{"HTTP_TOKEN_HASHES", " "}},
                                EnvChanges{{"HTTP_TOKEN_HASHES", pasted_token}}}) {
    auto process = f().StartProjectionProcess(env);
    const auto result = process.Wait(30s);
    const auto given = env.begin()->second.value_or("(unset)");
    EXPECT_EQ(result.exit_code, 2) << given << "\n" << result.out << result.err;
    EXPECT_THAT(result.err + result.out, ::testing::HasSubstr("http.token_hashes")) << given;
    EXPECT_EQ((result.err + result.out).find(pasted_token), std::string::npos) << "the error repeats the value";
  }
  const auto migrated = RunProcess({SETTLEMENT_PROJECTION_BIN, "migrate"}, f().ProjectionEnv({{"HTTP_TOKEN_HASHES", std::nullopt}}));
  EXPECT_EQ(migrated.exit_code, 0) << migrated.out << migrated.err;
}

// /readyz's database question is asked at most once per readiness.reuse_for, however many probes come.
// The count is the database's own: the ledger the check reads becomes a view that counts its readers.
TEST_F(SettlementProjectionApiE2E, ReadinessProbesAskTheDatabaseAtMostOncePerReusePeriod) {
  f().projection_db().Execute(
      "ALTER TABLE schema_migrations RENAME TO schema_migrations_counted;"
      "CREATE SEQUENCE schema_migrations_reads;"
      "CREATE VIEW schema_migrations AS WITH n AS MATERIALIZED (SELECT nextval('schema_migrations_reads'))"
      "  SELECT m.* FROM schema_migrations_counted m, n");
  const auto reads = [&] {
    return std::stoi(f().projection_db().Scalar(
        "SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM schema_migrations_reads"));
  };
  const auto probe = [&](ServiceProcess& p, int times) {
    HttpTestClient admin(p.admin_port());
    for (int i = 0; i < times; ++i) {
      const auto r = admin.Get("/readyz");
      ASSERT_EQ(r.status(), 200u) << r.response.body();
      EXPECT_EQ(r.json().at("status").as_string(), "ready");
    }
  };

  {
    auto reused = f().StartProjection({{"READINESS_REUSE_FOR", "1m"}});
    const int before = reads();
    probe(*reused, 200);
    EXPECT_EQ(reads() - before, 1) << "200 probes within one reuse period";
  }
  // The counter counts: with nothing reused, every probe is a query.
  auto unreused = f().StartProjection({{"READINESS_REUSE_FOR", "0s"}});
  const int before = reads();
  probe(*unreused, 20);
  EXPECT_EQ(reads() - before, 20);
}

}  // namespace
}  // namespace charge_outbox::testing
