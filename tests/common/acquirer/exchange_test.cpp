// One exchange alone, on a connection the test opens to a Beast server on 127.0.0.1 (port 0): the
// response comes back whole, keep-alive decides reuse, and each way an answer can fail to arrive is the
// transport status the evidence rules expect.
#include "acquirer/exchange.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

#include "loopback_server.hpp"
#include "printers.hpp"
#include "run_sync.hpp"

namespace charge_outbox::acquirer::detail {
namespace {

namespace asio = boost::asio;
namespace http = boost::beast::http;
using std::chrono::milliseconds;
using testing::LoopbackServer;
using testing::ReceivedRequest;
using testing::Reply;
using testing::RunSync;

class ExchangeTest : public ::testing::Test {
 protected:
  std::shared_ptr<Connection> Connect(const LoopbackServer& server) {
    auto connection = std::make_shared<Connection>();
    connection->plain = std::make_unique<boost::beast::tcp_stream>(io_);
    connection->plain->socket().connect({asio::ip::make_address("127.0.0.1"), server.port()});
    return connection;
  }

  Exchanged Run(Connection& connection, milliseconds deadline = milliseconds{2000}, std::size_t max_body = 1024,
                bool reused = false) {
    HttpRequest request{http::verb::post, "/v1/captures", 11};
    request.set(http::field::host, "127.0.0.1");
    request.set("Idempotency-Key", "k1");
    request.body() = R"({"amount":1})";
    request.keep_alive(true);
    request.prepare_payload();
    return RunSync(io_, Exchange(connection, request, SteadyClock::now() + deadline, max_body, reused));
  }

  asio::io_context io_;
};

TEST_F(ExchangeTest, TheResponseComesBackWholeAndKeepAliveMakesTheConnectionReusable) {
  LoopbackServer server(io_, [](const ReceivedRequest& r) {
    return Reply::Json(201, R"({"id":"cap_1"})", {{"X-Echo", r.headers.at("idempotency-key")}});
  });
  const auto connection = Connect(server);
  const auto first = Run(*connection);
  ASSERT_EQ(first.result.status, TransportStatus::kResponse) << first.result.detail;
  EXPECT_TRUE(first.reusable);
  EXPECT_FALSE(first.result.reused_connection);
  ASSERT_TRUE(first.result.response.has_value());
  EXPECT_EQ(first.result.response->status, 201);
  EXPECT_EQ(first.result.response->body, R"({"id":"cap_1"})");
  const auto& headers = first.result.response->headers;
  EXPECT_NE(std::find(headers.begin(), headers.end(), std::pair<std::string, std::string>{"X-Echo", "k1"}),
            headers.end());
  ASSERT_EQ(server.requests().size(), 1u);
  EXPECT_EQ(server.requests()[0].body, R"({"amount":1})");

  const auto second = Run(*connection, milliseconds{2000}, 1024, true);
  EXPECT_EQ(second.result.status, TransportStatus::kResponse);
  EXPECT_TRUE(second.result.reused_connection);
  ASSERT_EQ(server.requests().size(), 2u);
  EXPECT_EQ(server.requests()[1].connection, server.requests()[0].connection);
  EXPECT_EQ(server.connections_accepted(), 1);
}

TEST_F(ExchangeTest, ConnectionCloseMakesItNotReusable) {
  LoopbackServer server(io_, [](const ReceivedRequest&) {
    auto reply = Reply::Of(Reply::Kind::kRespondThenClose);
    reply.status = 200;
    reply.body = "{}";
    return reply;
  });
  const auto connection = Connect(server);
  const auto exchanged = Run(*connection);
  EXPECT_EQ(exchanged.result.status, TransportStatus::kResponse);
  EXPECT_FALSE(exchanged.reusable);
}

TEST_F(ExchangeTest, AConnectionClosedAfterTheRequestIsDropped) {
  LoopbackServer server(io_, [](const ReceivedRequest&) { return Reply::Of(Reply::Kind::kCloseWithoutAnswer); });
  const auto connection = Connect(server);
  const auto exchanged = Run(*connection);
  EXPECT_EQ(exchanged.result.status, TransportStatus::kConnectionDropped);
  EXPECT_EQ(server.requests().size(), 1u);  // it was written: the acquirer may have acted on it
}

TEST_F(ExchangeTest, NoAnswerBeforeTheDeadlineIsAResponseTimeout) {
  LoopbackServer server(io_, [](const ReceivedRequest&) { return Reply::Of(Reply::Kind::kHang); });
  const auto connection = Connect(server);
  const auto started = SteadyClock::now();
  const auto exchanged = Run(*connection, milliseconds{200});
  EXPECT_EQ(exchanged.result.status, TransportStatus::kResponseTimedOut);
  EXPECT_EQ(exchanged.result.detail, "no response before the deadline");
  EXPECT_GE(SteadyClock::now() - started, milliseconds{200});
}

TEST_F(ExchangeTest, NotHttpOrABodyBeyondTheLimitIsMalformed) {
  LoopbackServer garbage(io_, [](const ReceivedRequest&) {
    auto reply = Reply::Of(Reply::Kind::kRaw);
    reply.body = "SSH-2.0-OpenSSH_9.6\r\n";
    return reply;
  });
  const auto to_garbage = Connect(garbage);
  EXPECT_EQ(Run(*to_garbage).result.status, TransportStatus::kResponseMalformed);

  LoopbackServer large(io_, [](const ReceivedRequest&) { return Reply::Json(200, std::string(2048, 'x')); });
  const auto to_large = Connect(large);
  EXPECT_EQ(Run(*to_large, milliseconds{2000}, 1024).result.status, TransportStatus::kResponseMalformed);
}

}  // namespace
}  // namespace charge_outbox::acquirer::detail
