// HttpAcquirerClient through real sockets on 127.0.0.1 against a scripted server: each place a call
// can fail ends in the right evidence class, the contract headers go out, keep-alive connections are
// reused and bounded, and TLS verifies the acquirer's certificate. Fast: the slowest case waits for a
// 300 ms deadline.
#include "charge_outbox/acquirer/http_acquirer_client.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/json/parse.hpp>
#include <filesystem>
#include <fstream>

#include "charge_outbox/config/config.hpp"
#include "charge_outbox/log/log.hpp"
#include "log_capture.hpp"
#include "loopback_server.hpp"
#include "printers.hpp"
#include "run_sync.hpp"

namespace charge_outbox::acquirer {
namespace {

namespace asio = boost::asio;
using std::chrono::milliseconds;
using testing::LoopbackServer;
using testing::ReceivedRequest;
using testing::Reply;
using testing::RunSync;
using ::testing::HasSubstr;

const CaptureRequest kRequest{"merchant-1:key 1+/x", 25000, "BRL", "ch_123", "pm_tok_visa"};

std::string CaptureBody(std::string id = "cap_1") {
  return R"({"id":")" + id +
         R"(","status":"captured","amount":25000,"currency":"BRL","reference":"ch_123",)"
         R"("created_at":"2024-03-10T11:59:59.123456Z","idempotency_key":"merchant-1:key 1+/x"})";
}

AcquirerClientConfig ConfigFor(const std::string& url) {
  AcquirerClientConfig c;
  c.base_url = url;
  c.api_key = "sk_test_secret";
  c.connect_timeout = milliseconds{2000};
  c.request_timeout = milliseconds{2000};
  return c;
}

std::string LocalUrl(unsigned short port) { return "http://127.0.0.1:" + std::to_string(port); }

class HttpAcquirerClientTest : public ::testing::Test {
 protected:
  AttemptOutcome Capture(HttpAcquirerClient& client, const std::string& request_id = "req-1") {
    return RunSync(io_, client.Capture(kRequest, request_id));
  }
  HttpAcquirerClient::PoolStats Stats(HttpAcquirerClient& client) { return RunSync(io_, client.Stats()); }

  asio::io_context io_;
};

TEST_F(HttpAcquirerClientTest, CaptureSendsTheContractHeadersAndBody) {
  LoopbackServer server(io_, [](const ReceivedRequest&) { return Reply::Json(201, CaptureBody()); });
  HttpAcquirerClient client(io_.get_executor(), ConfigFor(LocalUrl(server.port())));
  const auto outcome = Capture(client, "5f0c7a4e-0000-4000-8000-000000000001");

  EXPECT_EQ(outcome.kind, OutcomeKind::kCaptured) << outcome.detail;
  EXPECT_EQ(outcome.evidence(), EvidenceClass::kApproved);
  EXPECT_EQ(outcome.capture->id, "cap_1");
  ASSERT_EQ(server.requests().size(), 1u);
  const auto& r = server.requests()[0];
  EXPECT_EQ(r.method, "POST");
  EXPECT_EQ(r.target, "/v1/captures");
  EXPECT_EQ(r.headers.at("idempotency-key"), "merchant-1:key 1+/x");
  EXPECT_EQ(r.headers.at("x-request-id"), "5f0c7a4e-0000-4000-8000-000000000001");
  EXPECT_EQ(r.headers.at("authorization"), "Bearer sk_test_secret");
  EXPECT_EQ(r.headers.at("content-type"), "application/json");
  EXPECT_EQ(r.headers.at("host"), "127.0.0.1:" + std::to_string(server.port()));
  const auto body = boost::json::parse(r.body).as_object();
  EXPECT_EQ(body.at("amount").as_int64(), 25000);
  EXPECT_EQ(body.at("currency").as_string(), "BRL");
  EXPECT_EQ(body.at("reference").as_string(), "ch_123");
  EXPECT_EQ(body.at("payment_method").as_string(), "pm_tok_visa");
  EXPECT_THAT(outcome.detail, ::testing::Not(HasSubstr("sk_test_secret")));
}

// Issue 14, defect 6: the client is not told whose call it makes, so its per-call line carries no trace
// id, never one the thread happens to hold (on an I/O thread, whichever request ran there last).
TEST_F(HttpAcquirerClientTest, ThePerCallLineCarriesNoTraceIdTheThreadHolds) {
  LoopbackServer server(io_, [](const ReceivedRequest&) { return Reply::Json(201, CaptureBody()); });
  HttpAcquirerClient client(io_.get_executor(), ConfigFor(LocalUrl(server.port())));
  charge_outbox::testing::LogCapture captured;
  {
    log::ScopedTraceId other("0123456789abcdef0123456789abcdef");
    EXPECT_EQ(Capture(client, "req-traced").kind, OutcomeKind::kCaptured);
  }
  const auto lines = captured.LinesWith("request_id=req-traced");
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_FALSE(lines[0].contains("trace_id")) << boost::json::serialize(lines[0]);
}

TEST_F(HttpAcquirerClientTest, KeepAliveConnectionsAreReused) {
  LoopbackServer server(io_, [](const ReceivedRequest&) { return Reply::Json(201, CaptureBody()); });
  HttpAcquirerClient client(io_.get_executor(), ConfigFor(LocalUrl(server.port())));
  EXPECT_FALSE(Capture(client, "a").reused_connection);
  const auto second = Capture(client, "b");
  EXPECT_EQ(second.kind, OutcomeKind::kCaptured);
  EXPECT_TRUE(second.reused_connection);
  EXPECT_EQ(server.connections_accepted(), 1);
  const auto stats = Stats(client);
  EXPECT_EQ(stats.connections_opened, 1u);
  EXPECT_EQ(stats.open, 1u);
  EXPECT_EQ(stats.idle, 1u);
}

TEST_F(HttpAcquirerClientTest, ConnectRefusedIsNotSent) {
  HttpAcquirerClient client(io_.get_executor(), ConfigFor(LocalUrl(testing::ClosedLoopbackPort())));
  const auto outcome = Capture(client);
  EXPECT_EQ(outcome.kind, OutcomeKind::kNotSent) << outcome.detail;
  EXPECT_EQ(outcome.transport, TransportStatus::kConnectRefused);
  EXPECT_EQ(outcome.evidence(), EvidenceClass::kNotSent);
  EXPECT_EQ(outcome.retryability(), Retryability::kTransient);
  EXPECT_EQ(Stats(client).open, 0u);  // the slot came back
}

TEST_F(HttpAcquirerClientTest, NoAnswerAfterTheRequestWasWrittenIsUnknown) {
  LoopbackServer server(io_, [](const ReceivedRequest&) { return Reply::Of(Reply::Kind::kHang); });
  auto config = ConfigFor(LocalUrl(server.port()));
  config.request_timeout = milliseconds{300};
  HttpAcquirerClient client(io_.get_executor(), config);
  const auto outcome = Capture(client);
  EXPECT_EQ(outcome.kind, OutcomeKind::kTimedOut) << outcome.detail;
  EXPECT_EQ(outcome.transport, TransportStatus::kResponseTimedOut);
  EXPECT_EQ(outcome.evidence(), EvidenceClass::kUnknown);
  EXPECT_EQ(server.requests().size(), 1u);  // the acquirer did receive it
  EXPECT_EQ(Stats(client).open, 0u);        // a timed-out connection is never reused
}

TEST_F(HttpAcquirerClientTest, ConnectionClosedAfterTheRequestIsUnknown) {
  LoopbackServer server(io_, [](const ReceivedRequest&) { return Reply::Of(Reply::Kind::kCloseWithoutAnswer); });
  HttpAcquirerClient client(io_.get_executor(), ConfigFor(LocalUrl(server.port())));
  const auto outcome = Capture(client);
  EXPECT_EQ(outcome.kind, OutcomeKind::kConnectionDropped) << outcome.detail;
  EXPECT_EQ(outcome.transport, TransportStatus::kConnectionDropped);
  EXPECT_EQ(outcome.evidence(), EvidenceClass::kUnknown);
  EXPECT_FALSE(outcome.reused_connection);
  EXPECT_EQ(server.requests().size(), 1u);
}

TEST_F(HttpAcquirerClientTest, APooledConnectionThatDiesUnderTheRequestIsUnknownNotNotSent) {
  int served = 0;
  LoopbackServer server(io_, [&](const ReceivedRequest&) {
    return ++served == 1 ? Reply::Json(201, CaptureBody()) : Reply::Of(Reply::Kind::kCloseWithoutAnswer);
  });
  HttpAcquirerClient client(io_.get_executor(), ConfigFor(LocalUrl(server.port())));
  ASSERT_EQ(Capture(client, "a").kind, OutcomeKind::kCaptured);
  const auto outcome = Capture(client, "b");
  EXPECT_TRUE(outcome.reused_connection);
  EXPECT_EQ(outcome.kind, OutcomeKind::kConnectionDropped) << outcome.detail;
  EXPECT_EQ(outcome.evidence(), EvidenceClass::kUnknown);
}

TEST_F(HttpAcquirerClientTest, AnIdleConnectionTheServerClosedIsNotReused) {
  LoopbackServer server(io_, [](const ReceivedRequest&) { return Reply::Json(201, CaptureBody()); });
  HttpAcquirerClient client(io_.get_executor(), ConfigFor(LocalUrl(server.port())));
  ASSERT_EQ(Capture(client, "a").kind, OutcomeKind::kCaptured);
  server.CloseIdleConnections();  // the FIN is in the client's socket before the next call starts
  const auto outcome = Capture(client, "b");
  EXPECT_EQ(outcome.kind, OutcomeKind::kCaptured) << outcome.detail;
  EXPECT_FALSE(outcome.reused_connection);
  EXPECT_EQ(server.connections_accepted(), 2);
  EXPECT_EQ(Stats(client).stale_discarded, 1u);
}

TEST_F(HttpAcquirerClientTest, IdleTimeoutRetiresConnections) {
  LoopbackServer server(io_, [](const ReceivedRequest&) { return Reply::Json(201, CaptureBody()); });
  auto config = ConfigFor(LocalUrl(server.port()));
  config.idle_timeout = milliseconds{0};  // every idle connection is already too old
  HttpAcquirerClient client(io_.get_executor(), config);
  ASSERT_EQ(Capture(client, "a").kind, OutcomeKind::kCaptured);
  EXPECT_FALSE(Capture(client, "b").reused_connection);
  EXPECT_EQ(server.connections_accepted(), 2);
}

TEST_F(HttpAcquirerClientTest, ConnectionCloseFromTheServerIsHonoured) {
  LoopbackServer server(io_, [](const ReceivedRequest&) {
    return Reply{Reply::Kind::kRespondThenClose, 201, CaptureBody(), {}};
  });
  HttpAcquirerClient client(io_.get_executor(), ConfigFor(LocalUrl(server.port())));
  ASSERT_EQ(Capture(client, "a").kind, OutcomeKind::kCaptured);
  EXPECT_EQ(Stats(client).idle, 0u);
  const auto second = Capture(client, "b");
  EXPECT_EQ(second.kind, OutcomeKind::kCaptured);
  EXPECT_FALSE(second.reused_connection);
}

TEST_F(HttpAcquirerClientTest, ThePoolNeverOpensMoreThanItsBound) {
  LoopbackServer server(io_, [](const ReceivedRequest&) { return Reply::Json(201, CaptureBody()); });
  auto config = ConfigFor(LocalUrl(server.port()));
  config.max_connections = 2;
  HttpAcquirerClient client(io_.get_executor(), config);
  int done = 0;
  int captured = 0;
  for (int i = 0; i < 6; ++i) {
    asio::co_spawn(io_, client.Capture(kRequest, "req-" + std::to_string(i)),
                   [&](std::exception_ptr e, AttemptOutcome outcome) {
                     ++done;
                     if (!e && outcome.kind == OutcomeKind::kCaptured) ++captured;
                   });
  }
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds{10};
  while (done < 6 && std::chrono::steady_clock::now() < give_up) io_.run_one_for(milliseconds{100});
  EXPECT_EQ(done, 6);
  EXPECT_EQ(captured, 6);
  EXPECT_EQ(server.connections_accepted(), 2);
  EXPECT_EQ(server.requests().size(), 6u);
  EXPECT_LE(Stats(client).open, 2u);
}

TEST_F(HttpAcquirerClientTest, ResponsesAreClassifiedThroughTheWire) {
  std::vector<Reply> replies = {
      Reply::Json(402, R"({"status":"declined","decline_code":"card_declined"})"),
      Reply::Json(503, R"({"error":"unavailable"})", {{"Retry-After", "2"}}),
      Reply::Json(429, "{}", {{"Retry-After", "Sun, 06 Nov 1994 08:49:37 GMT"}}),
      Reply::Json(422, R"({"error":"idempotency_key_reused"})"),
      Reply::Json(201, "{not json"),
  };
  std::size_t next = 0;
  LoopbackServer server(io_, [&](const ReceivedRequest&) { return replies.at(next++); });
  HttpAcquirerClient client(io_.get_executor(), ConfigFor(LocalUrl(server.port())));

  const auto declined = Capture(client);
  EXPECT_EQ(declined.kind, OutcomeKind::kDeclined);
  EXPECT_EQ(declined.decline_code, "card_declined");
  const auto unavailable = Capture(client);
  EXPECT_EQ(unavailable.kind, OutcomeKind::kUnavailable);
  EXPECT_EQ(unavailable.retry_after, std::chrono::seconds{2});
  const auto throttled = Capture(client);
  EXPECT_EQ(throttled.kind, OutcomeKind::kThrottled);
  EXPECT_EQ(throttled.retry_after, std::chrono::seconds{0});  // a date in the past
  EXPECT_EQ(Capture(client).kind, OutcomeKind::kContractError);
  const auto garbled = Capture(client);
  EXPECT_EQ(garbled.kind, OutcomeKind::kUntrustedResponse);
  EXPECT_EQ(garbled.evidence(), EvidenceClass::kUnknown);
  EXPECT_EQ(server.connections_accepted(), 1);  // error answers keep the connection
}

TEST_F(HttpAcquirerClientTest, NotHttpOrTooLargeIsUntrusted) {
  std::vector<Reply> replies = {
      Reply{Reply::Kind::kRaw, 0, "SSH-2.0-OpenSSH_9.2\r\n\r\n", {}},
      Reply::Json(201, CaptureBody() + std::string(4096, ' ')),
  };
  std::size_t next = 0;
  LoopbackServer server(io_, [&](const ReceivedRequest&) { return replies.at(next++); });
  auto config = ConfigFor(LocalUrl(server.port()));
  config.max_response_bytes = 1024;
  HttpAcquirerClient client(io_.get_executor(), config);
  const auto garbage = Capture(client);
  EXPECT_EQ(garbage.kind, OutcomeKind::kUntrustedResponse) << garbage.detail;
  EXPECT_EQ(garbage.transport, TransportStatus::kResponseMalformed);
  const auto large = Capture(client);
  EXPECT_EQ(large.kind, OutcomeKind::kUntrustedResponse) << large.detail;
  EXPECT_EQ(large.transport, TransportStatus::kResponseMalformed);
}

TEST_F(HttpAcquirerClientTest, LookupVoidAndListTargets) {
  std::vector<Reply> replies = {
      Reply::Json(404, R"({"error":"not_found"})"),
      Reply::Json(200, CaptureBody()),
      Reply::Json(200, R"({"id":"cap/1","status":"voided"})"),
      Reply::Json(200, R"({"data":[)" + CaptureBody() + R"(],"next_page_token":"tok 2"})"),
  };
  std::size_t next = 0;
  LoopbackServer server(io_, [&](const ReceivedRequest&) { return replies.at(next++); });
  HttpAcquirerClient client(io_.get_executor(), ConfigFor(LocalUrl(server.port()) + "/acq/"));

  const LookupRequest lookup{"merchant-1:key 1+/x", ExpectedCapture{25000, "BRL", "ch_123"}};
  EXPECT_EQ(RunSync(io_, client.LookupByKey(lookup, "r1")).kind, OutcomeKind::kNotFound);
  const auto found = RunSync(io_, client.LookupByKey(lookup, "r2"));
  EXPECT_EQ(found.kind, OutcomeKind::kCaptured);
  EXPECT_EQ(found.capture->idempotency_key, "merchant-1:key 1+/x");
  const auto voided = RunSync(io_, client.Void(VoidRequest{"cap/1", "void:k"}, "r3"));
  EXPECT_EQ(voided.kind, OutcomeKind::kVoided);
  ListWindow window;
  window.created_from = std::chrono::sys_days{std::chrono::year{2024} / 3 / 10} + std::chrono::microseconds{123456};
  window.created_to = window.created_from + std::chrono::hours{1};
  window.limit = 50;
  const auto page = RunSync(io_, client.ListPage(window, std::string("p&1"), "r4"));
  EXPECT_EQ(page.kind, OutcomeKind::kPage);
  EXPECT_EQ(page.next_page_token, "tok 2");

  ASSERT_EQ(server.requests().size(), 4u);
  EXPECT_EQ(server.requests()[0].method, "GET");
  EXPECT_EQ(server.requests()[0].target, "/acq/v1/captures?idempotency_key=merchant-1%3Akey%201%2B%2Fx");
  EXPECT_EQ(server.requests()[0].headers.count("idempotency-key"), 0u);
  EXPECT_EQ(server.requests()[2].method, "POST");
  EXPECT_EQ(server.requests()[2].target, "/acq/v1/captures/cap%2F1/void");
  EXPECT_EQ(server.requests()[2].headers.at("idempotency-key"), "void:k");
  EXPECT_EQ(server.requests()[3].target,
            "/acq/v1/captures?created_from=2024-03-10T00%3A00%3A00.123456Z&created_to=2024-03-10T01%3A00%3A00.123456Z"
            "&limit=50&page_token=p%261");
}

TEST_F(HttpAcquirerClientTest, ACallInFlightOutlivesTheClient) {
  LoopbackServer server(io_, [](const ReceivedRequest&) { return Reply::Of(Reply::Kind::kHang); });
  auto config = ConfigFor(LocalUrl(server.port()));
  config.request_timeout = milliseconds{300};
  auto client = std::make_unique<HttpAcquirerClient>(io_.get_executor(), config);
  auto call = client->Capture(kRequest, "r");
  client.reset();
  const auto outcome = RunSync(io_, std::move(call));
  EXPECT_EQ(outcome.kind, OutcomeKind::kTimedOut);
}

// ---- TLS -------------------------------------------------------------------------------------------

class HttpAcquirerClientTlsTest : public HttpAcquirerClientTest {
 protected:
  void SetUp() override {
    const auto certificate = testing::MakeSelfSignedCertificate();
    server_tls_.use_certificate_chain(asio::buffer(certificate.certificate_pem));
    server_tls_.use_private_key(asio::buffer(certificate.private_key_pem), asio::ssl::context::pem);
    ca_file_ = std::filesystem::temp_directory_path() / ("acquirer_ca_" + std::to_string(::getpid()) + ".pem");
    std::ofstream(ca_file_) << certificate.certificate_pem;
  }
  void TearDown() override { std::filesystem::remove(ca_file_); }

  asio::ssl::context server_tls_{asio::ssl::context::tls_server};
  std::filesystem::path ca_file_;
};

TEST_F(HttpAcquirerClientTlsTest, CapturesOverVerifiedTls) {
  LoopbackServer server(io_, [](const ReceivedRequest&) { return Reply::Json(201, CaptureBody()); }, &server_tls_);
  auto config = ConfigFor("https://localhost:" + std::to_string(server.port()));
  config.tls_ca_file = ca_file_.string();
  HttpAcquirerClient client(io_.get_executor(), config);
  const auto outcome = Capture(client);
  EXPECT_EQ(outcome.kind, OutcomeKind::kCaptured) << outcome.detail;
  EXPECT_TRUE(Capture(client, "again").reused_connection);
  ASSERT_EQ(server.requests().size(), 2u);
  EXPECT_EQ(server.requests()[0].headers.at("idempotency-key"), kRequest.idempotency_key);
}

TEST_F(HttpAcquirerClientTlsTest, AnUntrustedCertificateIsNotSent) {
  LoopbackServer server(io_, [](const ReceivedRequest&) { return Reply::Json(201, CaptureBody()); }, &server_tls_);
  // Verification on, trusting only a bundle that does not hold the server's certificate.
  auto config = ConfigFor("https://localhost:" + std::to_string(server.port()));
  const auto other = testing::MakeSelfSignedCertificate();
  const auto other_file = ca_file_.string() + ".other";
  std::ofstream(other_file) << other.certificate_pem;
  config.tls_ca_file = other_file;
  HttpAcquirerClient client(io_.get_executor(), config);
  const auto outcome = Capture(client);
  std::filesystem::remove(other_file);
  EXPECT_EQ(outcome.kind, OutcomeKind::kNotSent) << outcome.detail;
  EXPECT_EQ(outcome.transport, TransportStatus::kTlsFailed);
  EXPECT_THAT(outcome.detail, HasSubstr("certificate verify failed"));
  EXPECT_TRUE(server.requests().empty());
}

TEST_F(HttpAcquirerClientTlsTest, TheCertificateMustNameTheHost) {
  // Trusted, but issued for another host: a valid certificate for another site is not the acquirer.
  const auto elsewhere = testing::MakeSelfSignedCertificate("DNS:acquirer.example.com");
  asio::ssl::context tls(asio::ssl::context::tls_server);
  tls.use_certificate_chain(asio::buffer(elsewhere.certificate_pem));
  tls.use_private_key(asio::buffer(elsewhere.private_key_pem), asio::ssl::context::pem);
  LoopbackServer server(io_, [](const ReceivedRequest&) { return Reply::Json(201, CaptureBody()); }, &tls);
  const auto trusted = ca_file_.string() + ".elsewhere";
  std::ofstream(trusted) << elsewhere.certificate_pem;
  for (const std::string host : {"localhost", "127.0.0.1"}) {
    auto config = ConfigFor("https://" + host + ":" + std::to_string(server.port()));
    config.tls_ca_file = trusted;
    HttpAcquirerClient client(io_.get_executor(), config);
    const auto outcome = Capture(client);
    EXPECT_EQ(outcome.kind, OutcomeKind::kNotSent) << host << ": " << outcome.detail;
    EXPECT_EQ(outcome.transport, TransportStatus::kTlsFailed) << host;
  }
  std::filesystem::remove(trusted);
  EXPECT_TRUE(server.requests().empty());
  // With verification off (acquirer-sim behind a test proxy only), the same server is accepted.
  auto config = ConfigFor("https://localhost:" + std::to_string(server.port()));
  config.tls_verify = false;
  HttpAcquirerClient unverified(io_.get_executor(), config);
  EXPECT_EQ(Capture(unverified).kind, OutcomeKind::kCaptured);
}

TEST(HttpAcquirerClientConfig, AnUnreadableCaFileFailsAtStartUp) {
  asio::io_context io;
  auto settings = ConfigFor("https://localhost:1");
  settings.tls_ca_file = "/nonexistent/ca.pem";
  try {
    HttpAcquirerClient client(io.get_executor(), settings);
    ADD_FAILURE() << "expected a ConfigError";
  } catch (const config::ConfigError& e) {
    EXPECT_EQ(e.key(), "acquirer.tls.ca_file");
  }
}

}  // namespace
}  // namespace charge_outbox::acquirer
