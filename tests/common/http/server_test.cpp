// The HTTP server's contract, driven over loopback: keep-alive, limits, timeouts, and a graceful Stop.
#include "charge_outbox/http/server.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/http/error.hpp>
#include <future>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

#include "http_test_client.hpp"

namespace charge_outbox::http {
namespace {

using charge_outbox::testing::HttpTestClient;
using ::testing::HasSubstr;
namespace bhttp = boost::beast::http;
using namespace std::chrono_literals;

// Polls `condition` until it holds or `timeout` passes.
template <class Condition>
bool Eventually(Condition condition, std::chrono::milliseconds timeout = 5s) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (condition()) return true;
    std::this_thread::sleep_for(2ms);
  }
  return condition();
}

boost::asio::awaitable<void> SleepFor(std::chrono::milliseconds duration) {
  boost::asio::steady_timer timer(co_await boost::asio::this_coro::executor, duration);
  co_await timer.async_wait(boost::asio::use_awaitable);
}

// GET `target` with Connection: close from another loopback address (`source`, e.g. 127.0.0.2: another
// client as far as ClientKey is concerned); the whole answer as sent, empty if the server closed at once.
std::string GetFrom(const std::string& source, std::uint16_t port, const std::string& target) {
  boost::asio::io_context io;
  boost::asio::ip::tcp::socket socket(io);
  socket.open(boost::asio::ip::tcp::v4());
  socket.bind({boost::asio::ip::make_address(source), 0});
  socket.connect({boost::asio::ip::make_address("127.0.0.1"), port});
  const std::string request = "GET " + target + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
  boost::system::error_code ec;
  boost::asio::write(socket, boost::asio::buffer(request), ec);
  std::string answer;
  boost::asio::read(socket, boost::asio::dynamic_buffer(answer), ec);
  return answer;
}

// Echoes "METHOD target body"; `/sleep/N` waits N ms first; `/throw` throws; `/drop` closes; `/refuse`
// answers 401 marked as an anonymous refusal.
class EchoServer {
 public:
  explicit EchoServer(ServerOptions options = {})
      : server_(std::move(options), [this](Request request) { return Handle(std::move(request)); }) {
    port_ = server_.Start();
  }

  Server& server() { return server_; }
  std::uint16_t port() const { return port_; }
  int calls() const { return calls_.load(); }
  int in_handler() const { return in_handler_.load(); }

 private:
  boost::asio::awaitable<Reply> Handle(Request request) {
    ++calls_;
    ++in_handler_;
    struct Leave {
      std::atomic<int>& counter;
      ~Leave() { --counter; }
    } leave{in_handler_};
    const std::string target(request.target());
    if (target.starts_with("/sleep/")) co_await SleepFor(std::chrono::milliseconds{std::stoi(target.substr(7))});
    if (target == "/throw") throw std::runtime_error("handler exploded");
    if (target == "/drop") co_return Reply{Response{}, true};
    if (target == "/refuse") {
      co_return Reply{.response = ProblemJson(Status::unauthorized, "Unauthorized", "no key"), .anonymous_refusal = true};
    }
    Response response{Status::ok, 11};
    response.set(bhttp::field::content_type, "text/plain");
    response.body() = std::string(request.method_string()) + " " + target + " " + request.body();
    co_return Reply{std::move(response)};
  }

  std::atomic<int> calls_{0};
  std::atomic<int> in_handler_{0};
  Server server_;
  std::uint16_t port_ = 0;
};

TEST(HttpServer, KeepAliveServesSeveralRequestsOnOneConnection) {
  EchoServer echo;
  HttpTestClient client(echo.port());
  for (int i = 0; i < 3; ++i) {
    const auto r = client.Post("/things/" + std::to_string(i), "body" + std::to_string(i));
    ASSERT_TRUE(r.ok()) << r.error.message();
    EXPECT_EQ(r.status(), 200u);
    EXPECT_EQ(r.response.body(), "POST /things/" + std::to_string(i) + " body" + std::to_string(i));
    EXPECT_EQ(r.header("Content-Length"), std::to_string(r.response.body().size()));
    EXPECT_TRUE(r.response.keep_alive());
  }
  EXPECT_EQ(client.connects(), 1u);
  EXPECT_EQ(echo.server().OpenConnections(), 1u);
}

TEST(HttpServer, ConnectionCloseFromTheClientIsHonoured) {
  EchoServer echo;
  HttpTestClient client(echo.port());
  const auto r = client.Get("/x", {{"Connection", "close"}});
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r.response.keep_alive());
  EXPECT_TRUE(Eventually([&] { return echo.server().OpenConnections() == 0; }));
}

TEST(HttpServer, BodyOverTheLimitAnswers413ProblemJsonWithoutCallingTheHandler) {
  EchoServer echo({.body_limit = 1024});
  HttpTestClient client(echo.port());
  const auto r = client.Post("/big", std::string(1025, 'x'));
  ASSERT_TRUE(r.ok()) << r.error.message();
  EXPECT_EQ(r.status(), 413u);
  EXPECT_EQ(r.header("Content-Type"), "application/problem+json");
  const auto problem = r.json().as_object();
  EXPECT_EQ(problem.at("type").as_string(), "about:blank");
  EXPECT_EQ(problem.at("status").to_number<int>(), 413);
  EXPECT_EQ(problem.at("title").as_string(), "Request body too large");
  EXPECT_THAT(std::string(problem.at("detail").as_string()), HasSubstr("1024"));
  EXPECT_FALSE(r.response.keep_alive());
  EXPECT_EQ(echo.calls(), 0);

  HttpTestClient exact(echo.port());
  const auto at_limit = exact.Post("/ok", std::string(1024, 'y'));
  ASSERT_TRUE(at_limit.ok());
  EXPECT_EQ(at_limit.status(), 200u);
}

TEST(HttpServer, ChunkedBodyOverTheLimitAnswers413) {
  EchoServer echo({.body_limit = 100});
  HttpTestClient client(echo.port());
  std::string request = "POST /chunked HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n";
  for (int i = 0; i < 3; ++i) request += "40\r\n" + std::string(64, 'z') + "\r\n";
  request += "0\r\n\r\n";
  const auto r = client.SendRaw(request);
  ASSERT_TRUE(r.ok()) << r.error.message();
  EXPECT_EQ(r.status(), 413u);
  EXPECT_EQ(echo.calls(), 0);
}

TEST(HttpServer, MalformedRequestAnswers400AndCloses) {
  EchoServer echo;
  HttpTestClient client(echo.port());
  const auto r = client.SendRaw("THIS IS NOT HTTP\r\n\r\n");
  ASSERT_TRUE(r.ok()) << r.error.message();
  EXPECT_EQ(r.status(), 400u);
  EXPECT_EQ(r.header("Content-Type"), "application/problem+json");
  EXPECT_EQ(r.json().at("status").to_number<int>(), 400);
  EXPECT_FALSE(r.response.keep_alive());
  EXPECT_EQ(echo.calls(), 0);
  EXPECT_TRUE(Eventually([&] { return echo.server().OpenConnections() == 0; }));
}

TEST(HttpServer, OversizedHeaderAnswers431) {
  EchoServer echo({.header_limit = 512});
  HttpTestClient client(echo.port());
  const auto r = client.Get("/h", {{"X-Padding", std::string(1000, 'p')}});
  ASSERT_TRUE(r.ok()) << r.error.message();
  EXPECT_EQ(r.status(), 431u);
  EXPECT_EQ(echo.calls(), 0);
}

TEST(HttpServer, ReadTimeoutClosesAConnectionThatTricklesItsRequest) {
  EchoServer echo({.read_timeout = 200ms});
  HttpTestClient client(echo.port());
  const auto started = std::chrono::steady_clock::now();
  const auto r = client.SendRaw("POST /slow HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nabc");
  const auto elapsed = std::chrono::steady_clock::now() - started;
  EXPECT_EQ(r.error, bhttp::error::end_of_stream) << r.error.message();
  EXPECT_GE(elapsed, 200ms);
  EXPECT_LT(elapsed, 5s);
  EXPECT_EQ(echo.calls(), 0);
}

TEST(HttpServer, IdleKeptAliveConnectionIsClosedAfterTheIdleTimeout) {
  EchoServer echo({.idle_timeout = 200ms});
  HttpTestClient client(echo.port());
  ASSERT_EQ(client.Get("/once").status(), 200u);
  const auto started = std::chrono::steady_clock::now();
  EXPECT_TRUE(client.WaitForServerClose());
  EXPECT_GE(std::chrono::steady_clock::now() - started, 150ms);
}

TEST(HttpServer, ExpectContinueGetsA100BeforeTheBody) {
  EchoServer echo;
  HttpTestClient client(echo.port());
  const auto interim = client.SendRaw("PUT /e HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 4\r\n\r\n");
  ASSERT_TRUE(interim.ok()) << interim.error.message();
  EXPECT_EQ(interim.status(), 100u);
  const auto final_answer = client.SendRaw("data");
  ASSERT_TRUE(final_answer.ok()) << final_answer.error.message();
  EXPECT_EQ(final_answer.status(), 200u);
  EXPECT_EQ(final_answer.response.body(), "PUT /e data");
}

TEST(HttpServer, HandlerExceptionAnswers500ProblemAndKeepsServing) {
  EchoServer echo;
  HttpTestClient client(echo.port());
  const auto r = client.Get("/throw");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.status(), 500u);
  EXPECT_EQ(r.header("Content-Type"), "application/problem+json");
  EXPECT_EQ(client.Get("/after").status(), 200u);
}

TEST(HttpServer, CloseWithoutAnswerClosesTheConnectionSilently) {
  EchoServer echo;
  HttpTestClient client(echo.port());
  const auto r = client.Get("/drop");
  EXPECT_EQ(r.error, bhttp::error::end_of_stream) << r.error.message();
  EXPECT_EQ(echo.calls(), 1);
}

TEST(HttpServer, ConnectionsBeyondTheMaximumAreClosed) {
  EchoServer echo({.max_connections = 1});
  HttpTestClient first(echo.port());
  ASSERT_EQ(first.Get("/1").status(), 200u);
  HttpTestClient second(echo.port());
  const auto refused = second.Get("/2");
  EXPECT_FALSE(refused.ok());
  EXPECT_EQ(first.Get("/3").status(), 200u);
  first.Close();
  ASSERT_TRUE(Eventually([&] { return echo.server().OpenConnections() == 0; }));
  HttpTestClient third(echo.port());
  EXPECT_EQ(third.Get("/4").status(), 200u);
}

// Issue 14: one address trickling bodies must not hold every connection the server has.
TEST(HttpServer, ConnectionsBeyondAClientsShareAreClosedWhileOtherClientsGetIn) {
  EchoServer echo({.max_connections = 10, .max_connections_per_client = 1});
  HttpTestClient first(echo.port());
  ASSERT_EQ(first.Get("/1").status(), 200u);
  HttpTestClient second(echo.port());
  EXPECT_FALSE(second.Get("/2").ok());  // 127.0.0.1 holds its one

  // Another client (127.0.0.2, loopback as well) is served meanwhile.
  const auto answer = GetFrom("127.0.0.2", echo.port(), "/other");
  EXPECT_THAT(answer, HasSubstr("HTTP/1.1 200"));
  EXPECT_THAT(answer, HasSubstr("GET /other"));

  // The share is given back when the connection ends.
  first.Close();
  ASSERT_TRUE(Eventually([&] { return echo.server().OpenConnections() == 0; }));
  HttpTestClient third(echo.port());
  EXPECT_EQ(third.Get("/3").status(), 200u);
}

// Issue 44: the last connections are kept for a client that has none, however many others fill the rest.
TEST(HttpServer, ReservedConnectionsGoOnlyToAClientThatHasNone) {
  EchoServer echo({.max_connections = 4, .reserved_for_new_clients = 2});
  HttpTestClient first(echo.port()), second(echo.port()), third(echo.port());
  ASSERT_EQ(first.Get("/1").status(), 200u);
  ASSERT_EQ(second.Get("/2").status(), 200u);
  EXPECT_FALSE(third.Get("/3").ok()) << "127.0.0.1 holds two: the last two are kept for newcomers";
  EXPECT_THAT(GetFrom("127.0.0.2", echo.port(), "/new"), HasSubstr("HTTP/1.1 200"));
  EXPECT_TRUE(first.Get("/again").ok());
}

// Issue 44: Boost 1.81 accepts a chunk-size line of any length; the bounded read buffer ends it with a 400
// once it holds header_limit + body_limit + kReadBufferMargin bytes, before any handler runs.
TEST(HttpServer, AChunkSizeLineThatNeverEndsAnswers400AtTheReadBufferLimit) {
  EchoServer echo({.body_limit = 1024, .header_limit = 1024});
  ASSERT_EQ(ReadBufferLimit({.body_limit = 1024, .header_limit = 1024}), 1024u + 1024u + kReadBufferMargin);
  HttpTestClient client(echo.port());
  const std::string head = "POST /chunked HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n";
  const auto r = client.SendRaw(head + std::string(256 * 1024, 'f'));  // no CRLF: the line goes on
  ASSERT_TRUE(r.ok()) << r.error.message();
  EXPECT_EQ(r.status(), 400u);
  EXPECT_EQ(r.header("Content-Type"), "application/problem+json");
  EXPECT_THAT(std::string(r.json().at("detail").as_string()), HasSubstr("does not end within 6144 bytes"));
  EXPECT_FALSE(r.response.keep_alive());
  EXPECT_EQ(echo.calls(), 0);
  EXPECT_TRUE(Eventually([&] { return echo.server().OpenConnections() == 0; }));
}

// A request that fits is never refused by the bound: the body is consumed as it arrives.
TEST(HttpServer, ABodyAtTheLimitInManySmallChunksFitsTheReadBuffer) {
  EchoServer echo({.body_limit = 1024, .header_limit = 1024});
  HttpTestClient client(echo.port());
  std::string request = "POST /chunked HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n";
  for (int i = 0; i < 1024; ++i) request += "1\r\nz\r\n";
  request += "0\r\n\r\n";
  const auto r = client.SendRaw(request);
  ASSERT_TRUE(r.ok()) << r.error.message();
  EXPECT_EQ(r.status(), 200u);
  EXPECT_EQ(r.response.body(), "POST /chunked " + std::string(1024, 'z'));
}

// Holds every answer but the first `free` for `hold`, and remembers whom it was asked about.
class FakePacer final : public RefusalPacer {
 public:
  FakePacer(int free, std::chrono::milliseconds hold) : free_(free), hold_(hold) {}
  std::chrono::milliseconds HoldFor(const std::string& client) override {
    std::lock_guard lock(mutex_);
    clients_.push_back(client);
    return static_cast<int>(clients_.size()) > free_ ? hold_ : std::chrono::milliseconds::zero();
  }
  std::vector<std::string> clients() const {
    std::lock_guard lock(mutex_);
    return clients_;
  }

 private:
  const int free_;
  const std::chrono::milliseconds hold_;
  mutable std::mutex mutex_;
  std::vector<std::string> clients_;
};

// Only refusals are paced: the handler's marked ones and the server's own; an answer that is not a
// refusal never asks the pacer, and a held refusal keeps its connection.
TEST(HttpServer, AnonymousRefusalsWaitAsLongAsThePacerSaysAndNothingElseDoes) {
  auto pacer = std::make_shared<FakePacer>(1, 400ms);
  EchoServer echo({.pacer = pacer});
  HttpTestClient client(echo.port());
  const auto timed = [](auto send) {
    const auto started = std::chrono::steady_clock::now();
    const auto r = send();
    return std::pair{r, std::chrono::steady_clock::now() - started};
  };

  const auto [first, first_took] = timed([&] { return client.Get("/refuse"); });
  ASSERT_EQ(first.status(), 401u);
  const auto [second, second_took] = timed([&] { return client.Get("/refuse"); });
  ASSERT_EQ(second.status(), 401u);
  EXPECT_GE(second_took, 400ms) << "the pacer said to hold it";
  EXPECT_TRUE(second.response.keep_alive());
  EXPECT_EQ(client.connects(), 1u);
  EXPECT_LT(first_took, second_took);
  ASSERT_EQ(client.Get("/fine").status(), 200u);
  EXPECT_EQ(pacer->clients(), (std::vector<std::string>{"127.0.0.1", "127.0.0.1"}))
      << "an answer that is no refusal must not ask the pacer";

  HttpTestClient garbage(echo.port());
  const auto [malformed, malformed_took] = timed([&] { return garbage.SendRaw("THIS IS NOT HTTP\r\n\r\n"); });
  EXPECT_EQ(malformed.status(), 400u);
  EXPECT_GE(malformed_took, 400ms) << "the server's own refusals are paced too";
  EXPECT_EQ(pacer->clients().size(), 3u);
}

TEST(ClientKey, AnIpv4AddressOrAnIpv6Slash64) {
  using boost::asio::ip::make_address;
  EXPECT_EQ(ClientKey(make_address("203.0.113.7")), "203.0.113.7");
  EXPECT_EQ(ClientKey(make_address("::ffff:203.0.113.7")), "203.0.113.7");
  EXPECT_EQ(ClientKey(make_address("2001:db8:1:2:aaaa:bbbb:cccc:dddd")), ClientKey(make_address("2001:db8:1:2::1")));
  EXPECT_NE(ClientKey(make_address("2001:db8:1:2::1")), ClientKey(make_address("2001:db8:1:3::1")));
}

TEST(HttpServer, StopLetsAnInFlightRequestFinishThenRefusesConnections) {
  EchoServer echo;
  auto answer = std::async(std::launch::async, [port = echo.port()] {
    HttpTestClient client(port);
    return client.Get("/sleep/300");
  });
  ASSERT_TRUE(Eventually([&] { return echo.in_handler() == 1; }));
  const auto started = std::chrono::steady_clock::now();
  echo.server().Stop(10s);
  const auto stop_took = std::chrono::steady_clock::now() - started;
  const auto r = answer.get();
  ASSERT_TRUE(r.ok()) << r.error.message();
  EXPECT_EQ(r.status(), 200u);
  EXPECT_EQ(r.response.body(), "GET /sleep/300 ");
  EXPECT_FALSE(r.response.keep_alive());
  EXPECT_LT(stop_took, 5s);  // returned when the request was done, not at the deadline

  HttpTestClient late(echo.port());
  EXPECT_EQ(late.Get("/late").error, boost::asio::error::connection_refused);
}

TEST(HttpServer, StopClosesIdleConnectionsWithoutWaitingForTheDeadline) {
  EchoServer echo;
  HttpTestClient idle(echo.port());
  ASSERT_EQ(idle.Get("/once").status(), 200u);
  const auto started = std::chrono::steady_clock::now();
  echo.server().Stop(30s);
  EXPECT_LT(std::chrono::steady_clock::now() - started, 5s);
  EXPECT_TRUE(idle.WaitForServerClose());
}

TEST(HttpServer, StopCancelsHandlersStillRunningAtTheDeadline) {
  EchoServer echo;
  auto answer = std::async(std::launch::async, [port = echo.port()] {
    HttpTestClient client(port);
    return client.Get("/sleep/60000");
  });
  ASSERT_TRUE(Eventually([&] { return echo.in_handler() == 1; }));
  const auto started = std::chrono::steady_clock::now();
  echo.server().Stop(200ms);
  const auto stop_took = std::chrono::steady_clock::now() - started;
  EXPECT_GE(stop_took, 200ms);
  EXPECT_LT(stop_took, 3s);
  EXPECT_EQ(echo.in_handler(), 0);  // the handler's coroutine was cancelled and unwound
  const auto r = answer.get();
  EXPECT_FALSE(r.ok());
}

TEST(HttpServer, ConcurrentStopsAreSafe) {
  EchoServer echo;
  std::thread other([&] { echo.server().Stop(1s); });
  echo.server().Stop(1s);
  other.join();
  echo.server().Stop(1s);
  HttpTestClient late(echo.port(), "127.0.0.1", 2s);
  EXPECT_EQ(late.Get("/late").error, boost::asio::error::connection_refused);
}

TEST(HttpServer, SeveralThreadsServeConcurrentConnections) {
  EchoServer echo({.threads = 2});
  std::vector<std::future<bool>> clients;
  for (int c = 0; c < 8; ++c) {
    clients.push_back(std::async(std::launch::async, [port = echo.port(), c] {
      HttpTestClient client(port);
      for (int i = 0; i < 50; ++i) {
        const auto target = "/c" + std::to_string(c) + "/" + std::to_string(i);
        const auto r = client.Get(target);
        if (!r.ok() || r.response.body() != "GET " + target + " ") return false;
      }
      return client.connects() == 1;
    }));
  }
  for (auto& c : clients) EXPECT_TRUE(c.get());
  EXPECT_EQ(echo.calls(), 400);
}

TEST(ProblemJson, HasTheRfc9457MembersAndExtraOnes) {
  const auto response = ProblemJson(Status::unprocessable_entity, "Idempotency key reused",
                                    "the key was used with another body", {{"field", "amount"}});
  EXPECT_EQ(response.result(), Status::unprocessable_entity);
  EXPECT_EQ(response[bhttp::field::content_type], "application/problem+json");
  const auto body = boost::json::parse(response.body()).as_object();
  EXPECT_EQ(body.at("type").as_string(), "about:blank");
  EXPECT_EQ(body.at("title").as_string(), "Idempotency key reused");
  EXPECT_EQ(body.at("status").to_number<int>(), 422);
  EXPECT_EQ(body.at("detail").as_string(), "the key was used with another body");
  EXPECT_EQ(body.at("field").as_string(), "amount");

  const auto typed = ProblemJson(Status::conflict, "t", "d", {{"type", "https://example.test/conflict"}});
  EXPECT_EQ(boost::json::parse(typed.body()).at("type").as_string(), "https://example.test/conflict");
}

}  // namespace
}  // namespace charge_outbox::http
