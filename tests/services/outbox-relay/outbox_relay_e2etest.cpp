// outbox-relay as it runs: the real binary against a real PostgreSQL and Kafka, read back with a real
// consumer. Headers, the NOTIFY and polling paths, relay.linger (a trickle batched, a backlog back to
// back), one mark for several claims, a crash between publishing and marking, three relays sharing 10,000 charges' events written
// concurrently (and one of them killed mid-run), poison events with the parked commands, retention as a
// subcommand, and graceful SIGTERM.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <boost/json/parse.hpp>
#include <csignal>
#include <regex>
#include <set>
#include <thread>

#include "http_test_client.hpp"
#include "relay_fixture.hpp"
#include "test_env.hpp"

namespace charge_outbox::testing {
namespace {

using namespace std::chrono_literals;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

constexpr const char* kTraceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

class OutboxRelayE2E : public ::testing::Test {
 protected:
  void SetUp() override {
    fixture_ = std::make_unique<RelayE2E>(::testing::UnitTest::GetInstance()->current_test_info()->name());
  }
  PgTestDatabase& db() { return fixture_->db(); }
  bool AllPublished(std::chrono::milliseconds timeout) {
    return Eventually([&] { return Unpublished(db()) == 0; }, timeout);
  }
  // A relay that is ready and has published one event (its producer connected); that event is `warm_up_`
  // and the batches counted so far `batches_before_`.
  std::unique_ptr<ServiceProcess> StartWarmRelay(const EnvChanges& extra) {
    auto relay = fixture_->StartRelay(extra);
    HttpTestClient client(relay->admin_port());
    EXPECT_TRUE(Eventually([&] { return client.Get("/readyz").status() == 200; }, 20s)) << relay->Output();
    warm_up_ = WriteEvent(db().url(), NewUuid(), 1);
    EXPECT_TRUE(AllPublished(20s));
    batches_before_ = MetricValue(relay->admin_port(), "outbox_batch_events_count").value_or(-1);
    EXPECT_GE(batches_before_, 1.0);
    return relay;
  }
  double BatchesSinceWarmUp(const ServiceProcess& relay) {
    return *MetricValue(relay.admin_port(), "outbox_batch_events_count") - batches_before_;
  }

  std::unique_ptr<RelayE2E> fixture_;
  WrittenEvent warm_up_;
  double batches_before_ = 0;
};

TEST_F(OutboxRelayE2E, EveryEventArrivesWithItsKeyValueAndCloudEventsHeaders) {
  const auto charge = NewUuid();
  const auto first = WriteEvent(db().url(), charge, 1, 0, kTraceparent);
  const auto second = WriteEvent(db().url(), charge, 2);
  auto relay = fixture_->StartRelay({{"CLOUDEVENTS_SOURCE", "/charge-outbox/e2e"}});
  ASSERT_TRUE(AllPublished(20s)) << relay->Output();

  const auto consumed = ConsumeAll(fixture_->topic(), {first, second}, 30s);
  ASSERT_EQ(consumed.size(), 2u);
  EXPECT_THAT(ContractViolations(consumed, {first, second}), IsEmpty());
  for (const auto& m : consumed) {
    const auto& id = m.headers.at("ce_id");
    const auto row = "(SELECT * FROM outbox WHERE id = '" + id + "')";
    EXPECT_EQ(m.key, ChargeId(charge));
    EXPECT_EQ(m.value, db().Scalar("SELECT payload::text FROM " + row + " o"));
    EXPECT_EQ(m.headers.at("ce_specversion"), "1.0");
    EXPECT_EQ(m.headers.at("ce_source"), "/charge-outbox/e2e");
    EXPECT_EQ(m.headers.at("ce_type"), db().Scalar("SELECT type FROM " + row + " o"));
    EXPECT_EQ(m.headers.at("ce_time"), db().Scalar("SELECT rfc3339(created_at) FROM " + row + " o"));
    EXPECT_EQ(m.headers.at("ce_subject"), ChargeId(charge));
    EXPECT_EQ(m.headers.at("ce_dataschema"),
              "https://charge-outbox.example/schemas/events/" + m.headers.at("ce_type") + ".json");
    EXPECT_EQ(m.headers.at("content-type"), "application/json");
  }
  EXPECT_EQ(consumed[0].headers.at("ce_id"), first.id);
  EXPECT_EQ(consumed[0].headers.at("ce_type"), "payments.charge.initiated.v1");
  EXPECT_EQ(consumed[0].headers.at("traceparent"), kTraceparent);
  EXPECT_EQ(consumed[1].headers.count("traceparent"), 0u);  // the row has none: no empty header either
  EXPECT_EQ(consumed[1].headers.at("ce_type"), "payments.charge.captured.v1");

  EXPECT_EQ(MetricValue(relay->admin_port(), "outbox_events_published_total"), 2.0);
  EXPECT_TRUE(Eventually([&] { return MetricValue(relay->admin_port(), "outbox_unpublished_rows") == 0.0; }));
  EXPECT_EQ(MetricValue(relay->admin_port(), "outbox_lag_seconds"), 0.0);
  EXPECT_EQ(MetricValue(relay->admin_port(), "outbox_owned_shards"), 256.0);
  HttpTestClient client(relay->admin_port());
  EXPECT_EQ(client.Get("/healthz").status(), 200u);
  EXPECT_EQ(client.Get("/readyz").status(), 200u);

  // SIGTERM at idle: a clean exit.
  relay->process().Signal(SIGTERM);
  const auto exit = relay->process().Wait(15s);
  EXPECT_EQ(exit.exit_code, 0) << exit.out;
}

TEST_F(OutboxRelayE2E, SigtermDuringABatchAbandonsItWithoutMarkingAnything) {
  const auto written = WriteChargeEvents(db().url(), 5, 1);
  // No broker answers: the batch waits for delivery reports that never come.
  auto relay = fixture_->StartRelay({{"KAFKA_BOOTSTRAP_SERVERS", "127.0.0.1:1"},
                                     {"KAFKA_CREATE_TOPIC", "false"},
                                     {"LOG_LEVEL", "debug"}});
  ASSERT_TRUE(Eventually([&] { return relay->Output().find("publishing a batch of") != std::string::npos; }, 20s))
      << relay->Output();
  relay->process().Signal(SIGTERM);
  const auto exit = relay->process().Wait(15s);
  EXPECT_EQ(exit.exit_code, 0) << exit.out;
  // Every event of the batch (its later waves were never produced) and nothing marked.
  std::smatch abandoned;
  ASSERT_TRUE(std::regex_search(exit.out, abandoned, std::regex("abandoned ([0-9]+) of ([0-9]+) events without")))
      << exit.out;
  EXPECT_EQ(abandoned[1].str(), abandoned[2].str());
  EXPECT_GE(std::stoi(abandoned[1].str()), 5);
  EXPECT_EQ(Unpublished(db()), static_cast<std::int64_t>(written.size()));
}

TEST_F(OutboxRelayE2E, TheInsertNotificationDeliversWithin100msAtIdle) {
  // Polling and rebalancing every minute: only the notification can make an event go out quickly.
  auto relay = fixture_->StartRelay({{"RELAY_POLL_INTERVAL", "60s"}, {"RELAY_REBALANCE_INTERVAL", "60s"}});
  HttpTestClient client(relay->admin_port());
  ASSERT_TRUE(Eventually([&] { return client.Get("/readyz").status() == 200; }, 20s)) << relay->Output();
  // Warm up the producer's connection so that the measurement is the relay's path, not a first connect.
  WriteEvent(db().url(), NewUuid(), 1);
  ASSERT_TRUE(AllPublished(20s));

  std::vector<WrittenEvent> written;
  std::vector<double> latencies_ms;
  for (int i = 0; i < 5; ++i) {
    written.push_back(WriteEvent(db().url(), NewUuid(), 1));
    ASSERT_TRUE(AllPublished(5s)) << "event " << i << " not published: the notification did not wake the relay";
    // published_at is set after the delivery report, so this bounds commit -> persisted in Kafka.
    latencies_ms.push_back(std::stod(db().Scalar("SELECT extract(epoch FROM published_at - created_at) * 1000"
                                                 " FROM outbox WHERE id = '" + written.back().id + "'")));
    std::this_thread::sleep_for(50ms);  // idle again between events: that is the case tested
  }
  std::sort(latencies_ms.begin(), latencies_ms.end());
  EXPECT_LT(latencies_ms[2], 100.0) << "median commit -> published";
  EXPECT_LT(latencies_ms.back(), 1000.0) << "a poll (60s) cannot have found it";
  EXPECT_THAT(ContractViolations(ConsumeAll(fixture_->topic(), written, 30s), written), IsEmpty());
}

// relay.linger: under a steady trickle, the events committed within one linger share a claim, a mark and
// a produce, instead of a batch each; none waits much longer than the linger.
TEST_F(OutboxRelayE2E, ASteadyTrickleIsPublishedInBatchesOneLingerApart) {
  auto relay = StartWarmRelay({{"RELAY_LINGER", "250ms"}});
  ASSERT_FALSE(HasFailure());

  std::vector<WrittenEvent> written;
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 60; ++i) {  // one event every 25 ms for 1.5 s: ten in each linger
    std::this_thread::sleep_until(start + i * 25ms);
    written.push_back(WriteEvent(db().url(), NewUuid(), 1));
  }
  // Each write opens a connection: on a busy machine they take longer than 25 ms, so count the lingers that
  // fit in the time the writes really took.
  const auto lingers = std::chrono::duration<double>(std::chrono::steady_clock::now() - start) / 250ms;
  ASSERT_TRUE(AllPublished(20s));
  const auto batches = BatchesSinceWarmUp(*relay);
  // About one batch a linger (1.5 s / 250 ms when the writes keep time); without the linger every event
  // would have been a batch of its own.
  EXPECT_LE(batches, lingers + 3) << "over " << lingers << " lingers";
  EXPECT_GE(batches, 2.0);
  const auto slowest_ms = std::stod(db().Scalar(
      "SELECT max(extract(epoch FROM published_at - created_at) * 1000) FROM outbox WHERE id <> '" + warm_up_.id + "'"));
  EXPECT_LT(slowest_ms, 1500.0) << "an event waited far longer than relay.linger";
  EXPECT_THAT(ContractViolations(ConsumeAll(fixture_->topic(), written, 30s), written), IsEmpty());
}

// Marks: under a steady flow the events delivered by several claims are marked by one statement (one
// published_at), the claims meanwhile leave them out, so a charge's next events go out once and in order,
// and SIGTERM marks whatever was delivered before the process ends.
TEST_F(OutboxRelayE2E, DeliveredEventsAreMarkedSeveralClaimsAtATimeAndAllOfThemOnSigterm) {
  auto relay = StartWarmRelay({{"RELAY_LINGER", "5ms"}});
  ASSERT_FALSE(HasFailure());

  // Two charges, their events one after the other every 10 ms: each claim finds the next of a charge
  // whose previous event is delivered and, mostly, not marked yet.
  const std::string charges[] = {NewUuid(), NewUuid()};
  std::vector<WrittenEvent> written;
  EventWriter writer(db().url());
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 80; ++i) {
    std::this_thread::sleep_until(start + i * 10ms);
    written.push_back(writer.Write(charges[i % 2], i / 2 + 1));
  }
  ASSERT_TRUE(Eventually([&] { return fixture_->topic().Consume(81, 1s).size() >= 81; }, 20s))
      << "not everything was delivered";
  const auto batches = BatchesSinceWarmUp(*relay);
  relay->process().Signal(SIGTERM);
  const auto exit = relay->process().Wait(15s);
  EXPECT_EQ(exit.exit_code, 0) << exit.out;
  EXPECT_EQ(Unpublished(db()), 0) << "delivered events left unmarked at exit";

  const auto marks = std::stod(
      db().Scalar("SELECT count(DISTINCT published_at) FROM outbox WHERE id <> '" + warm_up_.id + "'"));
  EXPECT_LT(marks, batches) << "every batch was marked on its own";
  const auto consumed = ConsumeAll(fixture_->topic(), written, 30s);
  EXPECT_THAT(ContractViolations(consumed, written), IsEmpty());
  std::set<std::string> ids;
  for (const auto& e : written) ids.insert(e.id);
  const auto copies = std::count_if(consumed.begin(), consumed.end(), [&](const auto& m) {
    const auto id = EventId(m);
    return id && ids.contains(*id);
  });
  EXPECT_EQ(copies, std::ssize(written)) << "an event delivered and not yet marked was sent again";
}

// A full batch means a backlog: the next claim follows at once, whatever the linger.
TEST_F(OutboxRelayE2E, ABacklogIsDrainedBackToBackWhateverTheLinger) {
  const auto written = WriteChargeEvents(db().url(), 1500, 4);  // over 3,000 events: 31 batches of 100
  auto relay = fixture_->StartRelay({{"RELAY_LINGER", "1s"}, {"RELAY_BATCH_SIZE", "100"}});
  HttpTestClient client(relay->admin_port());
  ASSERT_TRUE(Eventually([&] { return client.Get("/readyz").status() == 200; }, 20s)) << relay->Output();
  // Lingering between full batches would take over 30 s.
  EXPECT_TRUE(AllPublished(15s)) << Unpublished(db()) << " left";
  EXPECT_THAT(ContractViolations(ConsumeAll(fixture_->topic(), written, 60s), written), IsEmpty());
}

TEST_F(OutboxRelayE2E, PollingFindsEventsWhenNoNotificationComes) {
  db().Execute("ALTER TABLE outbox DISABLE TRIGGER outbox_notify");
  auto relay = fixture_->StartRelay({{"RELAY_POLL_INTERVAL", "300ms"}, {"RELAY_REBALANCE_INTERVAL", "60s"}});
  HttpTestClient client(relay->admin_port());
  ASSERT_TRUE(Eventually([&] { return client.Get("/readyz").status() == 200; }, 20s)) << relay->Output();
  ASSERT_TRUE(Eventually([&] { return MetricValue(relay->admin_port(), "outbox_owned_shards") == 256.0; }));
  const auto event = WriteEvent(db().url(), NewUuid(), 1);
  ASSERT_TRUE(AllPublished(5s));
  EXPECT_THAT(ContractViolations(ConsumeAll(fixture_->topic(), {event}, 30s), {event}), IsEmpty());
}

TEST_F(OutboxRelayE2E, ACrashAfterPublishingBeforeMarkingRepublishesTheBatch) {
  const auto written = WriteChargeEvents(db().url(), 20, 2);
  auto crashing = fixture_->StartRelay({{"FAILPOINTS", "relay.after_publish_before_mark=crash"}});
  const auto crashed = crashing->process().Wait(30s);
  EXPECT_EQ(crashed.term_signal, SIGKILL) << crashed.out;
  // It published a batch (the consumer sees it) and marked nothing.
  EXPECT_EQ(Unpublished(db()), static_cast<std::int64_t>(written.size()));
  EXPECT_FALSE(fixture_->topic().Consume(1, 15s).empty()) << "the crashed relay published nothing";

  auto relay = fixture_->StartRelay();
  ASSERT_TRUE(AllPublished(30s)) << relay->Output();
  const auto consumed = ConsumeAll(fixture_->topic(), written, 60s);
  EXPECT_THAT(ContractViolations(consumed, written), IsEmpty());
  EXPECT_GT(consumed.size(), written.size()) << "the first batch went out twice";
}

TEST_F(OutboxRelayE2E, ThreeRelaysKeepEveryChargesOrderWith10000ChargesWrittenConcurrently) {
  std::vector<std::unique_ptr<ServiceProcess>> relays;
  for (int i = 0; i < 3; ++i) relays.push_back(fixture_->StartRelay({{"RELAY_BATCH_SIZE", "200"}}));
  ASSERT_TRUE(Eventually(
      [&] {
        return std::all_of(relays.begin(), relays.end(), [](const auto& r) {
          const auto owned = MetricValue(r->admin_port(), "outbox_owned_shards");
          return MetricValue(r->admin_port(), "outbox_live_relays") == 3.0 && owned >= 85.0 && owned <= 86.0;
        });
      },
      20s));
  const auto written = WriteChargeEvents(db().url(), 10'000, 8);
  ASSERT_TRUE(AllPublished(120s));
  // A relay counts a batch once its mark has committed, a moment after the table says published: on a
  // loaded machine the last batches' counts were read 535 short (5 December), so they are waited for.
  double published = 0;
  const auto counted = [&] {
    published = 0;
    for (const auto& r : relays) published += MetricValue(r->admin_port(), "outbox_events_published_total").value_or(0);
    return published >= static_cast<double>(written.size());
  };
  EXPECT_TRUE(Eventually(counted, 10s)) << published << " counted of " << written.size();
  for (const auto& r : relays) {
    EXPECT_GT(MetricValue(r->admin_port(), "outbox_events_published_total").value_or(0), 0) << "every relay took a share";
  }
  const auto consumed = ConsumeAll(fixture_->topic(), written, 120s);
  const auto violations = ContractViolations(consumed, written);
  EXPECT_THAT(violations, IsEmpty()) << violations.size() << " violations";
}

TEST_F(OutboxRelayE2E, KillingOneOfThreeRelaysMidRunLosesNothingAndKeepsOrder) {
  std::vector<std::unique_ptr<ServiceProcess>> relays;
  // Small batches, and a stall before each mark, so that the killed relay dies holding a batch.
  for (int i = 0; i < 3; ++i) {
    relays.push_back(fixture_->StartRelay({{"RELAY_BATCH_SIZE", "50"},
                                           {"FAILPOINTS", "relay.after_publish_before_mark=sleep(20)"}}));
  }
  ASSERT_TRUE(Eventually(
      [&] {
        return std::all_of(relays.begin(), relays.end(),
                           [](const auto& r) { return MetricValue(r->admin_port(), "outbox_live_relays") == 3.0; });
      },
      20s));
  std::vector<WrittenEvent> written;
  std::thread writer([&] { written = WriteChargeEvents(db().url(), 5'000, 4); });
  // Mid-run: the victim has published some of its share and more is coming.
  ASSERT_TRUE(Eventually([&] { return MetricValue(relays[1]->admin_port(), "outbox_events_published_total") >= 200.0; }, 60s));
  relays[1]->process().Signal(SIGKILL);
  relays[1]->process().Wait(10s);
  ASSERT_TRUE(Eventually(
      [&] {
        return MetricValue(relays[0]->admin_port(), "outbox_owned_shards") == 128.0 &&
               MetricValue(relays[2]->admin_port(), "outbox_owned_shards") == 128.0;
      },
      20s))
      << "the survivors did not take over the dead relay's shards";
  writer.join();
  ASSERT_TRUE(AllPublished(120s));
  const auto consumed = ConsumeAll(fixture_->topic(), written, 120s);
  const auto violations = ContractViolations(consumed, written);
  EXPECT_THAT(violations, IsEmpty()) << violations.size() << " violations";
}

TEST_F(OutboxRelayE2E, ProbesAndScrapesAnswer405WithAllowToAnyMethodButGet) {
  auto relay = fixture_->StartRelay({});
  HttpTestClient client(relay->admin_port());
  for (const char* path : {"/healthz", "/readyz", "/metrics"}) {
    for (const auto method : {boost::beast::http::verb::trace, boost::beast::http::verb::post,
                              boost::beast::http::verb::delete_}) {
      const auto r = client.Send(method, path);
      EXPECT_EQ(r.status(), 405u) << path;
      EXPECT_EQ(r.header("Allow"), "GET") << path;
    }
  }
  EXPECT_EQ(client.Get("/healthz").status(), 200u);
}

TEST_F(OutboxRelayE2E, SeveralWorkersInOneProcessShareTheShardsAsMembers) {
  auto relay = fixture_->StartRelay({{"RELAY_WORKERS", "4"}});
  ASSERT_TRUE(Eventually(
      [&] {
        return MetricValue(relay->admin_port(), "outbox_live_relays") == 4.0 &&
               MetricValue(relay->admin_port(), "outbox_owned_shards") == 256.0;
      },
      20s))
      << relay->Output();
  // The workers joined before taking shards: the first of them did not take all 256 to hand them over.
  EXPECT_THAT(relay->Output(), Not(HasSubstr("owning 256 of 256 shards")));
  const auto written = WriteChargeEvents(db().url(), 1'000, 4);
  ASSERT_TRUE(AllPublished(60s));
  // A worker counts its batch once its mark has committed, a moment after the rows show it: polled.
  EXPECT_TRUE(Eventually(
      [&] {
        return MetricValue(relay->admin_port(), "outbox_events_published_total") == static_cast<double>(written.size());
      },
      10s))
      << MetricValue(relay->admin_port(), "outbox_events_published_total").value_or(-1) << " counted of " << written.size();
  EXPECT_THAT(ContractViolations(ConsumeAll(fixture_->topic(), written, 60s), written), IsEmpty());
}

// ce_source names the daemon that wrote the event: the writing session's application_name, recorded in
// the row (migration 0009). A row without one (written before it) keeps the configured cloudevents.source.
TEST_F(OutboxRelayE2E, CeSourceNamesTheDaemonThatWroteTheEvent) {
  const auto as = [&](const std::string& daemon) {
    const auto url = db().url();
    return url + (url.find('?') == std::string::npos ? "?" : "&") + "application_name=" + daemon;
  };
  const auto charge = NewUuid();
  const auto initiated = WriteEvent(as("charge-api"), charge, 1);
  const auto captured = WriteEvent(as("reconciler"), charge, 2);
  const auto unrecorded = WriteEvent(db().url(), NewUuid(), 1);
  auto relay = fixture_->StartRelay({{"CLOUDEVENTS_SOURCE", "/charge-outbox/unrecorded"}});
  ASSERT_TRUE(AllPublished(20s)) << relay->Output();
  const std::vector<WrittenEvent> written{initiated, captured, unrecorded};
  const auto consumed = ConsumeAll(fixture_->topic(), written, 30s);
  EXPECT_THAT(ContractViolations(consumed, written), IsEmpty());
  std::map<std::string, std::string> source;
  for (const auto& m : consumed) source[m.headers.at("ce_id")] = m.headers.at("ce_source");
  EXPECT_EQ(source[initiated.id], "/charge-outbox/charge-api");
  EXPECT_EQ(source[captured.id], "/charge-outbox/reconciler");
  EXPECT_EQ(source[unrecorded.id], "/charge-outbox/unrecorded");
}

// cloudevents.mode=structured, for sinks that drop Kafka headers: the same events, the attributes in the
// value, still valid against their schemas and still in order per charge.
TEST_F(OutboxRelayE2E, StructuredModePutsTheAttributesInTheValue) {
  const auto charge = NewUuid();
  const auto first = WriteEvent(db().url(), charge, 1, 0, kTraceparent);
  const auto second = WriteEvent(db().url(), charge, 2);
  const auto third = WriteEvent(db().url(), charge, 3);
  auto relay = fixture_->StartRelay({{"CLOUDEVENTS_MODE", "structured"}});
  ASSERT_TRUE(AllPublished(20s)) << relay->Output();
  const std::vector<WrittenEvent> written{first, second, third};
  const auto consumed = ConsumeAll(fixture_->topic(), written, 30s);
  ASSERT_EQ(consumed.size(), 3u);
  EXPECT_THAT(ContractViolations(consumed, written), IsEmpty());
  for (std::size_t i = 0; i < consumed.size(); ++i) {
    const auto& m = consumed[i];
    EXPECT_EQ(m.key, ChargeId(charge));
    EXPECT_EQ(m.headers.at("content-type"), "application/cloudevents+json");
    EXPECT_EQ(m.headers.count("ce_id"), 0u);  // binary mode's headers are not sent as well
    const auto envelope = boost::json::parse(m.value).as_object();
    EXPECT_EQ(envelope.at("id").as_string(), written[i].id);
    EXPECT_EQ(envelope.at("subject").as_string(), ChargeId(charge));
    EXPECT_EQ(envelope.at("data"),
              boost::json::parse(db().Scalar("SELECT payload::text FROM outbox WHERE id = '" + written[i].id + "'")));
  }
  EXPECT_EQ(boost::json::parse(consumed[0].value).at("traceparent").as_string(), kTraceparent);
  EXPECT_EQ(consumed[0].headers.at("traceparent"), kTraceparent);
}

TEST_F(OutboxRelayE2E, APoisonEventIsParkedOthersFlowAndRetryOrSkipReleaseItsCharge) {
  const auto a = NewUuid();
  const auto b = NewUuid();
  const auto c = NewUuid();
  const auto a1 = WriteEvent(db().url(), a, 1);
  const auto a2 = WriteEvent(db().url(), a, 2, 200'000);  // over this relay's 100 kB limit
  const auto a3 = WriteEvent(db().url(), a, 3);
  const auto b1 = WriteEvent(db().url(), b, 1);
  const auto b2 = WriteEvent(db().url(), b, 2);
  const auto c1 = WriteEvent(db().url(), c, 1, 2'000'000);  // over any limit here (the broker's is 1 MB)
  const auto c2 = WriteEvent(db().url(), c, 2);
  auto small = fixture_->StartRelay({{"KAFKA_MESSAGE_MAX_BYTES", "100000"}});
  const auto published = [&](const WrittenEvent& e) {
    return db().Scalar("SELECT published_at IS NOT NULL FROM outbox WHERE id = '" + e.id + "'") == "t";
  };
  const auto parked = [&](const WrittenEvent& e) {
    return db().Scalar("SELECT parked_at IS NOT NULL FROM outbox WHERE id = '" + e.id + "'") == "t";
  };
  ASSERT_TRUE(Eventually([&] { return published(a1) && published(b1) && published(b2) && parked(a2) && parked(c1); }, 20s))
      << small->Output();
  EXPECT_FALSE(published(a3));  // waits behind a2
  EXPECT_FALSE(published(c2));
  EXPECT_TRUE(Eventually([&] { return MetricValue(small->admin_port(), "outbox_parked_rows") == 2.0; }));
  EXPECT_EQ(MetricValue(small->admin_port(), "outbox_events_parked_total"), 2.0);
  EXPECT_EQ(MetricValue(small->admin_port(), "outbox_publish_errors_total{retryability=\"never\"}"), 2.0);

  auto list = fixture_->RunCommand({"parked", "list"});
  ASSERT_EQ(list.exit_code, 0) << list.err;
  EXPECT_THAT(list.out, HasSubstr(a2.id));
  EXPECT_THAT(list.out, HasSubstr(c1.id));
  EXPECT_THAT(list.out, HasSubstr("MSG_SIZE_TOO_LARGE"));

  // An operator raises the relay's limit (a new release), then retries a2: it goes, then a3, in order.
  small->process().Signal(SIGTERM);
  EXPECT_EQ(small->process().Wait(15s).exit_code, 0);
  auto relay = fixture_->StartRelay();
  ASSERT_TRUE(Eventually([&] { return MetricValue(relay->admin_port(), "outbox_owned_shards") == 256.0; }, 20s));
  EXPECT_FALSE(published(a3));
  // Who and why are required, and go on record with the change.
  EXPECT_EQ(fixture_->RunCommand({"parked", "retry", a2.id}).exit_code, 2);
  EXPECT_EQ(fixture_->RunCommand({"parked", "retry", a2.id, "--by", "dana"}).exit_code, 2);
  auto retry = fixture_->RunCommand({"parked", "retry", a2.id, "--by", "dana", "--reason", "raised max.message.bytes"});
  EXPECT_EQ(retry.exit_code, 0) << retry.err;
  ASSERT_TRUE(Eventually([&] { return published(a2) && published(a3); }, 20s)) << relay->Output();

  // c1 cannot be sent by anyone: skipping it releases c2. Skipping twice says there is nothing to skip.
  EXPECT_FALSE(published(c2));
  auto skip = fixture_->RunCommand({"parked", "skip", c1.id, "--by", "dana", "--reason", "OPS-9: payload unsendable"});
  EXPECT_EQ(skip.exit_code, 0) << skip.err;
  ASSERT_TRUE(Eventually([&] { return published(c2); }, 20s));
  EXPECT_EQ(fixture_->RunCommand({"parked", "skip", c1.id, "--by", "dana", "--reason", "again"}).exit_code, 1);
  EXPECT_EQ(fixture_->RunCommand({"parked", "retry", "not-a-uuid", "--by", "dana", "--reason", "r"}).exit_code, 2);
  EXPECT_EQ(fixture_->db().Scalar("SELECT string_agg(operator || '|' || action || '|' || subject || '|' || reason || '|' ||"
                                  " after, ',' ORDER BY id) FROM operator_actions"),
            "dana|parked.retry|" + a2.id + "|raised max.message.bytes|retried,dana|parked.skip|" + c1.id +
                "|OPS-9: payload unsendable|skipped (never sent)");

  const std::vector<WrittenEvent> delivered{a1, a2, a3, b1, b2, c2};
  const auto consumed = ConsumeAll(fixture_->topic(), delivered, 30s);
  EXPECT_THAT(ContractViolations(consumed, delivered), IsEmpty());
  for (const auto& m : consumed) EXPECT_NE(m.headers.at("ce_id"), c1.id);
}

TEST_F(OutboxRelayE2E, TheRetentionSubcommandMovesDropsAndKeepsDays) {
  db().Execute("SELECT outbox_ensure_partitions((now() AT TIME ZONE 'UTC')::date - 12, (now() AT TIME ZONE 'UTC')::date - 11);"
               "SELECT outbox_ensure_partitions((now() AT TIME ZONE 'UTC')::date - 3, (now() AT TIME ZONE 'UTC')::date - 3)");
  const auto day = [&](int offset) {
    return db().Scalar("SELECT 'outbox_' || to_char((now() AT TIME ZONE 'UTC')::date + " + std::to_string(offset) +
                       ", 'YYYYMMDD')");
  };
  db().Execute("INSERT INTO outbox (id, aggregateid, type, payload, sequence, shard, created_at, published_at) VALUES"
               " (gen_random_uuid(), 'ch_old', 't', '{}', 1, 1, now() - interval '12 days', now()),"
               " (gen_random_uuid(), 'ch_kept', 't', '{}', 1, 1, now() - interval '11 days', NULL),"
               " (gen_random_uuid(), 'ch_recent', 't', '{}', 1, 1, now() - interval '3 days', now())");
  const auto result = fixture_->RunCommand({"retention"}, {{"RETENTION_DAYS", "7"}, {"RETENTION_DAYS_AHEAD", "3"}});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const auto report = boost::json::parse(result.out).as_object();
  const auto names = [&](const char* key) {
    std::vector<std::string> out;
    for (const auto& v : report.at(key).as_array()) out.emplace_back(v.as_string());
    return out;
  };
  EXPECT_THAT(names("dropped"), ElementsAre(day(-12)));
  EXPECT_THAT(names("kept_unpublished"), ElementsAre(day(-11)));
  EXPECT_THAT(names("moved_to_history"), ElementsAre(day(-3)));
  EXPECT_THAT(names("trimmed_ahead"), ElementsAre(day(4), day(5), day(6), day(7)));  // migration 0001 made 7
  EXPECT_THAT(names("failed"), IsEmpty());
  EXPECT_EQ(db().Scalar("SELECT to_regclass('" + day(-12) + "') IS NULL"), "t");
  EXPECT_EQ(db().Scalar("SELECT to_regclass('" + day(-11) + "') IS NOT NULL"), "t");
  EXPECT_EQ(db().Scalar("SELECT count(*) FROM outbox_history WHERE aggregateid = 'ch_recent'"), "1");
}

}  // namespace
}  // namespace charge_outbox::testing
