// slow_clients: connections that send a request's headers and then trickle its body a byte at a time
// (or stall), the slowloris half of the flood bench. Each of N connections holds a server connection
// for as long as the server lets it; when the server closes it (its read timeout) or answers, the
// connection is opened again at once, until --duration ends. What it measures is how the server ends
// them: how long each was held, how many were closed without an answer and which answers came.
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <algorithm>
#include <array>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <map>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "client_support.hpp"

namespace charge_outbox::bench {
namespace {

namespace asio = boost::asio;
using namespace asio::experimental::awaitable_operators;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;
constexpr auto kNoThrow = asio::as_tuple(asio::use_awaitable);

constexpr const char* kUsage = R"(usage: slow_clients --port PORT [options]
  --host HOST            target address (127.0.0.1)
  --source ADDR          local address to connect from (the kernel's choice)
  --connections N        connections held at once (200)
  --duration D           how long to keep them up, e.g. 30s (10s)
  --trickle D            one body byte every D; 0 sends the headers and then nothing (1s)
  --content-length N     the body size the headers announce; the body never completes (1000)
  --path PATH            request target (/v1/charges)
  --header "N: V"        extra header, repeatable
  --label TEXT           name shown in the result line
The last line printed is machine-readable:
  RESULT label=... connections=... seconds=... opened=... connect_failed=... server_closed=... answered=...
         held_p50_ms=... held_max_ms=... open_at_end=...)";

struct Options {
  std::string host = "127.0.0.1";
  std::uint16_t port = 0;
  std::optional<asio::ip::address> source;
  std::size_t connections = 200;
  std::chrono::milliseconds duration{10'000};
  std::chrono::milliseconds trickle{1'000};
  std::size_t content_length = 1000;
  std::string path = "/v1/charges";
  std::vector<std::string> headers;
  std::string label = "slow_clients";
};

Options ParseArgs(int argc, char** argv) {
  Options o;
  const std::vector<std::string> args(argv + 1, argv + argc);
  for (std::size_t i = 0; i < args.size(); ++i) {
    const auto& flag = args[i];
    if (flag == "--help") {
      std::cout << kUsage << "\n";
      std::exit(0);
    }
    if (i + 1 >= args.size()) throw std::invalid_argument(flag + " needs a value");
    const std::string& value = args[++i];
    if (flag == "--host") o.host = value;
    else if (flag == "--port") o.port = static_cast<std::uint16_t>(std::stoul(value));
    else if (flag == "--source") o.source = asio::ip::make_address(value);
    else if (flag == "--connections") o.connections = std::stoul(value);
    else if (flag == "--duration") o.duration = ParseDuration(value);
    else if (flag == "--trickle") o.trickle = ParseDuration(value);
    else if (flag == "--content-length") o.content_length = std::stoul(value);
    else if (flag == "--path") o.path = value;
    else if (flag == "--header") {
      if (value.find(':') == std::string::npos) throw std::invalid_argument("--header wants \"Name: value\"");
      o.headers.push_back(value);
    } else if (flag == "--label") o.label = value;
    else throw std::invalid_argument("unknown flag " + flag);
  }
  if (o.port == 0) throw std::invalid_argument("--port is required");
  if (o.connections == 0) throw std::invalid_argument("--connections must be at least 1");
  if (o.content_length < 2) throw std::invalid_argument("--content-length must be at least 2");
  return o;
}

struct Stats {
  std::uint64_t opened = 0;          // connections established
  std::uint64_t connect_failed = 0;  // refused, reset or timed out before the headers went out
  std::uint64_t server_closed = 0;   // closed (or reset) by the server without an answer
  std::map<unsigned, std::uint64_t> answers;  // the server answered (and closed): by status
  std::uint64_t open_at_end = 0;     // still held when --duration ended
  std::vector<std::uint32_t> held_ms;  // how long each connection the server ended was held
};

class SlowClients {
 public:
  SlowClients(Options options, asio::io_context& ioc) : options_(std::move(options)), ioc_(ioc) {}

  void Start() {
    stop_at_ = Clock::now() + options_.duration;
    std::random_device device;
    run_id_ = std::to_string(device());
    for (std::size_t i = 0; i < options_.connections; ++i) asio::co_spawn(ioc_, Client(), asio::detached);
  }

  const Stats& stats() const { return stats_; }

 private:
  enum class Ended { kStopped, kWriteFailed };

  std::string Headers() {
    std::string head = "POST " + options_.path + " HTTP/1.1\r\nHost: " + options_.host +
                       "\r\nContent-Type: application/json\r\nIdempotency-Key: slow-" + run_id_ + "-" +
                       std::to_string(next_seq_++) + "\r\nContent-Length: " + std::to_string(options_.content_length) +
                       "\r\n";
    for (const auto& header : options_.headers) head += header + "\r\n";
    return head + "\r\n";
  }

  asio::awaitable<void> Client() {
    tcp::resolver resolver(ioc_);
    const auto endpoints =
        co_await resolver.async_resolve(options_.host, std::to_string(options_.port), asio::use_awaitable);
    const tcp::endpoint target = *endpoints.begin();
    asio::steady_timer backoff(ioc_);
    while (Clock::now() < stop_at_) {
      tcp::socket socket(ioc_);
      boost::system::error_code ec;
      if (options_.source) ec = OpenFrom(socket, target.protocol(), *options_.source);
      if (!ec) {
        auto [connect_ec] = co_await socket.async_connect(target, kNoThrow);
        ec = connect_ec;
      }
      if (!ec) {
        auto [write_ec, written] = co_await asio::async_write(socket, asio::buffer(Headers()), kNoThrow);
        ec = write_ec;
      }
      if (ec) {
        ++stats_.connect_failed;
        backoff.expires_after(std::chrono::milliseconds{100});  // a full server: do not spin
        co_await backoff.async_wait(kNoThrow);
        continue;
      }
      ++stats_.opened;
      const auto opened_at = Clock::now();
      auto ended = co_await (AwaitServer(socket) || Trickle(socket));
      if (ended.index() == 1 && std::get<1>(ended) == Ended::kStopped) {
        ++stats_.open_at_end;
        break;
      }
      stats_.held_ms.push_back(static_cast<std::uint32_t>(
          std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - opened_at).count()));
      if (ended.index() == 0 && std::get<0>(ended)) ++stats_.answers[*std::get<0>(ended)];
      else ++stats_.server_closed;
    }
  }

  // Completes when the server answers (its status) or closes the connection (nullopt).
  static asio::awaitable<std::optional<unsigned>> AwaitServer(tcp::socket& socket) {
    std::array<char, 4096> buffer{};
    auto [ec, n] = co_await socket.async_read_some(asio::buffer(buffer), kNoThrow);
    if (ec || n < 12) co_return std::nullopt;
    // "HTTP/1.1 408 ..."
    const std::string_view line(buffer.data(), n);
    unsigned status = 0;
    if (line.starts_with("HTTP/1.")) std::from_chars(line.data() + 9, line.data() + 12, status);
    co_return status;
  }

  // Sends the body a byte at a time, never its last byte, until --duration ends.
  asio::awaitable<Ended> Trickle(tcp::socket& socket) {
    asio::steady_timer timer(ioc_);
    for (std::size_t sent = 0;;) {
      const bool more = options_.trickle.count() > 0 && sent + 1 < options_.content_length;
      const auto next = more ? Clock::now() + options_.trickle : stop_at_;
      if (next >= stop_at_) {
        timer.expires_at(stop_at_);
        co_await timer.async_wait(kNoThrow);
        co_return Ended::kStopped;
      }
      timer.expires_at(next);
      co_await timer.async_wait(kNoThrow);
      auto [ec, n] = co_await asio::async_write(socket, asio::buffer("{", 1), kNoThrow);
      if (ec) co_return Ended::kWriteFailed;
      ++sent;
    }
  }

  Options options_;
  asio::io_context& ioc_;
  Clock::time_point stop_at_;
  std::string run_id_;
  std::uint64_t next_seq_ = 0;
  Stats stats_;
};

}  // namespace
}  // namespace charge_outbox::bench

int main(int argc, char** argv) {
  using namespace charge_outbox::bench;
  Options options;
  try {
    options = ParseArgs(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "slow_clients: " << e.what() << "\n" << kUsage << "\n";
    return 2;
  }
  boost::asio::io_context ioc(1);
  SlowClients clients(options, ioc);
  clients.Start();
  ioc.run();

  auto s = clients.stats();
  std::sort(s.held_ms.begin(), s.held_ms.end());
  std::uint64_t answered = 0;
  for (const auto& [status, count] : s.answers) answered += count;
  const double seconds = std::chrono::duration<double>(options.duration).count();
  std::printf("%s: %zu slow connections for %.2fs: %llu opened, %llu closed by the server unanswered, %llu answered, "
              "%llu failed to connect\n",
              options.label.c_str(), options.connections, seconds, static_cast<unsigned long long>(s.opened),
              static_cast<unsigned long long>(s.server_closed), static_cast<unsigned long long>(answered),
              static_cast<unsigned long long>(s.connect_failed));
  for (const auto& [status, count] : s.answers) {
    std::printf("  status %u: %llu\n", status, static_cast<unsigned long long>(count));
  }
  std::printf("  held ms: p50 %u  max %u\n", Percentile(s.held_ms, 0.5), Percentile(s.held_ms, 1.0));
  std::printf("RESULT label=%s connections=%zu seconds=%.3f opened=%llu connect_failed=%llu server_closed=%llu "
              "answered=%llu held_p50_ms=%u held_max_ms=%u open_at_end=%llu\n",
              options.label.c_str(), options.connections, seconds, static_cast<unsigned long long>(s.opened),
              static_cast<unsigned long long>(s.connect_failed), static_cast<unsigned long long>(s.server_closed),
              static_cast<unsigned long long>(answered), Percentile(s.held_ms, 0.5), Percentile(s.held_ms, 1.0),
              static_cast<unsigned long long>(s.open_at_end));
  return s.opened > 0 ? 0 : 1;
}
