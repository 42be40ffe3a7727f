// loadgen: an HTTP/1.1 load generator for the project's services (acquirer-sim now, charge-api later).
//
// One thread, one io_context, N kept-alive connections. Closed loop by default: each connection sends
// its next request as soon as the previous answer is read, so the figure is the server's throughput at
// that concurrency. With --rate, requests are scheduled at a fixed arrival rate and latency is measured
// from each request's scheduled send time, so a stalled server shows up in the latency instead of
// silently slowing the generator down (coordinated omission).
//
// Every request can carry unique values: "{seq}" in the body, path or a header value becomes the
// request's sequence number and "{run}" a per-process random id, so Idempotency-Key: {run}-{seq} makes
// every request a new capture.
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "client_support.hpp"

namespace charge_outbox::bench {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;
constexpr auto kNoThrow = asio::as_tuple(asio::use_awaitable);

constexpr const char* kUsage = R"(usage: loadgen --port PORT [options]
  --host HOST            target address (127.0.0.1)
  --source ADDR          local address to send from, e.g. 127.0.0.2 (the kernel's choice)
  --port PORT            target port (required)
  --method METHOD        any method token, e.g. GET, POST, PUT, TRACE, BREW (POST)
  --path PATH            request target, placeholders allowed (/v1/captures)
  --body TEXT            body template; {seq} and {run} are replaced per request
  --body-file FILE       body template read from a file
  --header "N: V"        extra header, repeatable; placeholders allowed in V
  --connections N        kept-alive connections (32)
  --duration D           measured time, e.g. 10s or 500ms (10s)
  --warmup D             time before measuring (1s)
  --rate R               fixed arrival rate in requests/s across all connections (off: closed loop)
  --timeout D            per-request timeout (5s)
  --label TEXT           name shown in the result line
The last line printed is machine-readable:
  RESULT label=... requests=... seconds=... rps=... errors=... p50_us=... p90_us=... p99_us=... p999_us=... max_us=...)";

// A template split at its placeholders, so that filling it is a few appends.
class Template {
 public:
  Template() = default;
  explicit Template(std::string_view text) {
    std::size_t pos = 0;
    while (pos < text.size()) {
      const auto open = text.find('{', pos);
      if (open == std::string_view::npos) break;
      Part kind = Part::kText;
      std::size_t length = 0;
      if (text.substr(open, 5) == "{seq}") kind = Part::kSeq, length = 5;
      else if (text.substr(open, 5) == "{run}") kind = Part::kRun, length = 5;
      if (kind == Part::kText) {
        Literal(text.substr(pos, open + 1 - pos));
        pos = open + 1;
        continue;
      }
      Literal(text.substr(pos, open - pos));
      parts_.push_back({kind, {}});
      pos = open + length;
    }
    Literal(text.substr(pos));
  }

  void Fill(std::uint64_t seq, std::string_view run, std::string& out) const {
    out.clear();
    for (const auto& [kind, literal] : parts_) {
      switch (kind) {
        case Part::kText:
          out += literal;
          break;
        case Part::kSeq: {
          char buf[24];
          const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, seq);
          out.append(buf, end);
          break;
        }
        case Part::kRun:
          out += run;
          break;
      }
    }
  }

 private:
  enum class Part { kText, kSeq, kRun };
  void Literal(std::string_view text) {
    if (text.empty()) return;
    if (!parts_.empty() && parts_.back().first == Part::kText) parts_.back().second += text;
    else parts_.push_back({Part::kText, std::string(text)});
  }
  std::vector<std::pair<Part, std::string>> parts_;
};

struct Options {
  std::string host = "127.0.0.1";
  std::uint16_t port = 0;
  std::string method = "POST";
  std::optional<asio::ip::address> source;
  std::string path = "/v1/captures";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
  std::size_t connections = 32;
  std::chrono::milliseconds duration{10'000};
  std::chrono::milliseconds warmup{1'000};
  std::optional<double> rate;
  std::chrono::milliseconds timeout{5'000};
  std::string label = "loadgen";
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
    else if (flag == "--method") o.method = value;
    else if (flag == "--source") o.source = asio::ip::make_address(value);
    else if (flag == "--path") o.path = value;
    else if (flag == "--body") o.body = value;
    else if (flag == "--body-file") {
      std::ifstream in(value);
      if (!in) throw std::invalid_argument("cannot read " + value);
      std::stringstream s;
      s << in.rdbuf();
      o.body = s.str();
    } else if (flag == "--header") {
      const auto colon = value.find(':');
      if (colon == std::string::npos) throw std::invalid_argument("--header wants \"Name: value\"");
      auto header_value = value.substr(colon + 1);
      header_value.erase(0, header_value.find_first_not_of(' '));
      o.headers.emplace_back(value.substr(0, colon), header_value);
    } else if (flag == "--connections") o.connections = std::stoul(value);
    else if (flag == "--duration") o.duration = ParseDuration(value);
    else if (flag == "--warmup") o.warmup = ParseDuration(value);
    else if (flag == "--rate") o.rate = std::stod(value);
    else if (flag == "--timeout") o.timeout = ParseDuration(value);
    else if (flag == "--label") o.label = value;
    else throw std::invalid_argument("unknown flag " + flag);
  }
  if (o.port == 0) throw std::invalid_argument("--port is required");
  if (o.method.empty() || o.method.find_first_of(" \t\r\n") != std::string::npos) {
    throw std::invalid_argument("--method must be one token");
  }
  if (o.connections == 0) throw std::invalid_argument("--connections must be at least 1");
  if (o.rate && *o.rate <= 0) throw std::invalid_argument("--rate must be positive");
  return o;
}

struct Stats {
  std::uint64_t requests = 0;  // answered inside the measured window
  std::uint64_t errors = 0;    // transport errors and timeouts inside the window
  std::map<unsigned, std::uint64_t> statuses;
  std::vector<std::uint32_t> latencies_us;
};

class LoadGenerator {
 public:
  LoadGenerator(Options options, asio::io_context& ioc)
      : options_(std::move(options)),
        ioc_(ioc),
        path_(options_.path),
        body_(options_.body),
        run_id_(RunId()) {
    for (const auto& [name, value] : options_.headers) headers_.emplace_back(name, Template(value));
  }

  void Start() {
    const auto now = Clock::now();
    start_ = now;
    measure_from_ = now + options_.warmup;
    stop_at_ = measure_from_ + options_.duration;
    if (options_.rate) period_ = std::chrono::duration<double>(1.0 / *options_.rate);
    stats_.latencies_us.reserve(1 << 20);
    for (std::size_t i = 0; i < options_.connections; ++i) {
      asio::co_spawn(ioc_, Connection(), asio::detached);
    }
  }

  const Stats& stats() const { return stats_; }
  const Options& options() const { return options_; }

 private:
  static std::string RunId() {
    std::random_device device;
    char buf[17];
    std::snprintf(buf, sizeof buf, "%08x%08x", device(), device());
    return buf;
  }

  // With --source the socket is bound to that address first, so only the first resolved endpoint is tried.
  asio::awaitable<boost::system::error_code> Connect(beast::tcp_stream& stream,
                                                     const tcp::resolver::results_type& endpoints) {
    if (!options_.source) {
      auto [ec, endpoint] = co_await stream.async_connect(endpoints, kNoThrow);
      co_return ec;
    }
    const tcp::endpoint target = *endpoints.begin();
    if (const auto ec = OpenFrom(stream.socket(), target.protocol(), *options_.source)) co_return ec;
    auto [connect_ec] = co_await stream.async_connect(target, kNoThrow);
    co_return connect_ec;
  }

  asio::awaitable<void> Connection() {
    tcp::resolver resolver(ioc_);
    const auto endpoints = co_await resolver.async_resolve(options_.host, std::to_string(options_.port), asio::use_awaitable);
    beast::tcp_stream stream(ioc_);
    beast::flat_buffer buffer;
    bool connected = false;
    asio::steady_timer pacer(ioc_);
    bhttp::request<bhttp::string_body> request;
    request.version(11);
    // A method Beast does not know (a hostile client's BREW) is sent as its text.
    if (const auto verb = bhttp::string_to_verb(options_.method); verb != bhttp::verb::unknown) request.method(verb);
    else request.method_string(options_.method);
    request.set(bhttp::field::host, options_.host);
    std::string scratch;
    for (;;) {
      const std::uint64_t seq = next_seq_++;
      Clock::time_point sent_at = Clock::now();
      if (period_) {
        // Scheduled arrivals: latency counts from when the request should have been sent.
        const auto scheduled =
            start_ + std::chrono::duration_cast<Clock::duration>(*period_ * static_cast<double>(seq));
        if (scheduled >= stop_at_) co_return;
        if (scheduled > sent_at) {
          pacer.expires_at(scheduled);
          co_await pacer.async_wait(kNoThrow);
        }
        sent_at = scheduled;
      } else if (sent_at >= stop_at_) {
        co_return;
      }
      if (!connected) {
        stream.expires_after(options_.timeout);
        const auto connect_ec = co_await Connect(stream, endpoints);
        if (connect_ec) {
          Record(sent_at, std::nullopt);
          continue;
        }
        stream.socket().set_option(tcp::no_delay(true));
        buffer.clear();
        connected = true;
      }
      path_.Fill(seq, run_id_, scratch);
      request.target(scratch);
      for (const auto& [name, value] : headers_) {
        value.Fill(seq, run_id_, scratch);
        request.set(name, scratch);
      }
      body_.Fill(seq, run_id_, request.body());
      request.prepare_payload();

      stream.expires_after(options_.timeout);
      auto [write_ec, written] = co_await bhttp::async_write(stream, request, kNoThrow);
      bhttp::response_parser<bhttp::string_body> parser;
      parser.body_limit(64 * 1024 * 1024);
      boost::system::error_code read_ec = write_ec;
      if (!write_ec) {
        auto [response_ec, response_bytes] = co_await bhttp::async_read(stream, buffer, parser, kNoThrow);
        read_ec = response_ec;
      }
      if (read_ec) {
        Record(sent_at, std::nullopt);
        boost::system::error_code close_after_error;
        stream.socket().close(close_after_error);
        connected = false;
        continue;
      }
      Record(sent_at, parser.get().result_int());
      if (!parser.get().keep_alive()) {
        boost::system::error_code close_when_asked;
        stream.socket().close(close_when_asked);
        connected = false;
      }
    }
  }

  void Record(Clock::time_point sent_at, std::optional<unsigned> status) {
    const auto now = Clock::now();
    if (sent_at < measure_from_ || now >= stop_at_ + options_.timeout) return;
    if (!period_ && now >= stop_at_) return;  // closed loop: only answers inside the window count
    if (!status) {
      ++stats_.errors;
      return;
    }
    ++stats_.requests;
    ++stats_.statuses[*status];
    const auto us = std::chrono::duration_cast<std::chrono::microseconds>(now - sent_at).count();
    stats_.latencies_us.push_back(static_cast<std::uint32_t>(std::min<std::int64_t>(us, UINT32_MAX)));
  }

  Options options_;
  asio::io_context& ioc_;
  Template path_;
  Template body_;
  std::vector<std::pair<std::string, Template>> headers_;
  std::string run_id_;
  Clock::time_point start_;
  Clock::time_point measure_from_;
  Clock::time_point stop_at_;
  std::optional<std::chrono::duration<double>> period_;
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
    std::cerr << "loadgen: " << e.what() << "\n" << kUsage << "\n";
    return 2;
  }
  boost::asio::io_context ioc(1);
  LoadGenerator generator(options, ioc);
  generator.Start();
  ioc.run();

  auto stats = generator.stats();
  std::sort(stats.latencies_us.begin(), stats.latencies_us.end());
  const double seconds = std::chrono::duration<double>(options.duration).count();
  const double rps = static_cast<double>(stats.requests) / seconds;
  std::printf("%s: %llu answers in %.2fs (%zu connections, %s): %.0f/s, %llu errors\n", options.label.c_str(),
              static_cast<unsigned long long>(stats.requests), seconds, options.connections,
              options.rate ? "fixed rate" : "closed loop", rps, static_cast<unsigned long long>(stats.errors));
  for (const auto& [status, count] : stats.statuses) {
    std::printf("  status %u: %llu\n", status, static_cast<unsigned long long>(count));
  }
  const auto& l = stats.latencies_us;
  std::printf("  latency us: p50 %u  p90 %u  p99 %u  p99.9 %u  max %u\n", Percentile(l, 0.5), Percentile(l, 0.9),
              Percentile(l, 0.99), Percentile(l, 0.999), l.empty() ? 0u : l.back());
  std::printf("RESULT label=%s requests=%llu seconds=%.3f rps=%.1f errors=%llu p50_us=%u p90_us=%u p99_us=%u "
              "p999_us=%u max_us=%u\n",
              options.label.c_str(), static_cast<unsigned long long>(stats.requests), seconds, rps,
              static_cast<unsigned long long>(stats.errors), Percentile(l, 0.5), Percentile(l, 0.9), Percentile(l, 0.99),
              Percentile(l, 0.999), l.empty() ? 0u : l.back());
  return stats.errors == 0 && stats.requests > 0 ? 0 : 1;
}
