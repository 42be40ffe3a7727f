// Nobody without a key can restart or OOM-kill charge-api (issue 44, item 1). The real binary with its
// default admin bounds, PostgreSQL and acquirer-sim:
//   - idle sockets from one pod, more than the admin port ever held, leave the kubelet's probes (another
//     address: 127.0.0.2) answered at once, and are closed after admin.idle_timeout;
//   - a chunk-size line that never ends (Boost 1.81's Beast sets it no limit) is refused on both ports
//     with the server's memory flat while 64 MB are sent.
// Clients are plain POSIX sockets: the test must see exactly when the server closes, and send without
// a client library buffering anything.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>
#include <arpa/inet.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "charge_stack.hpp"
#include "http_test_client.hpp"
#include "pg_test_database.hpp"
#include "service_process.hpp"
#include "test_env.hpp"

namespace charge_outbox::testing {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using ::testing::HasSubstr;

constexpr const char* kAcquirerKey = "ak_test_takedown";

long Ms(Clock::duration d) { return static_cast<long>(std::chrono::duration_cast<std::chrono::milliseconds>(d).count()); }

// A TCP socket to 127.0.0.1:port from `source` (another loopback address is another client); -1 on failure.
int ConnectFrom(const char* source, std::uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in from{};
  from.sin_family = AF_INET;
  ::inet_pton(AF_INET, source, &from.sin_addr);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(port);
  ::inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&from), sizeof from) != 0 ||
      ::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

struct Socket {
  int fd = -1;
  explicit Socket(int descriptor) : fd(descriptor) {}
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;
  ~Socket() {
    if (fd >= 0) ::close(fd);
  }
};

// Whether the server has closed `fd` (EOF or reset), waiting up to `wait`.
bool ClosedByServer(int fd, std::chrono::milliseconds wait) {
  pollfd p{fd, POLLIN, 0};
  if (::poll(&p, 1, static_cast<int>(wait.count())) <= 0) return false;
  char byte = 0;
  const auto n = ::recv(fd, &byte, 1, MSG_DONTWAIT | MSG_PEEK);
  return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
}

// Everything the server sends on `fd` until it closes (or `timeout` passes).
std::string ReadAll(int fd, std::chrono::milliseconds timeout) {
  std::string answer;
  const auto deadline = Clock::now() + timeout;
  char chunk[4096];
  while (Clock::now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(Ms(deadline - Clock::now()))) <= 0) break;
    const auto n = ::recv(fd, chunk, sizeof chunk, 0);
    if (n <= 0) break;
    answer.append(chunk, static_cast<std::size_t>(n));
  }
  return answer;
}

struct Probe {
  std::string answer;
  Clock::duration took{};
};

// One kubelet-style probe: a new connection from `source`, GET, Connection: close, read to the end.
Probe ProbeFrom(const char* source, std::uint16_t port, const std::string& path) {
  const auto started = Clock::now();
  Socket socket(ConnectFrom(source, port));
  Probe probe;
  if (socket.fd < 0) return probe;
  const std::string request = "GET " + path + " HTTP/1.1\r\nHost: probe\r\nConnection: close\r\n\r\n";
  if (::send(socket.fd, request.data(), request.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(request.size())) {
    return probe;
  }
  probe.answer = ReadAll(socket.fd, 5s);
  probe.took = Clock::now() - started;
  return probe;
}

// The resident set of process `pid` in kB (VmRSS of /proc/PID/status); -1 if unreadable.
long RssKb(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.starts_with("VmRSS:")) return std::stol(line.substr(6));
  }
  return -1;
}

class PodTakedownE2E : public ::testing::Test {
 protected:
  void SetUp() override {
    db_ = PgTestDatabase::Create(::testing::UnitTest::GetInstance()->current_test_info()->name(),
                                 PgTestDatabase::Schema::kMigrated);
    dir_ = fs::temp_directory_path() / UniqueName("pod_takedown_e2e");
    sim_ = std::make_unique<ServiceProcess>(std::vector<std::string>{ACQUIRER_SIM_BIN},
                                            EnvChanges{{"HTTP_PORT", "0"},
                                                       {"DATA_DIR", (dir_ / "sim").string()},
                                                       {"AUTH_API_KEYS", kAcquirerKey}});
    // The admin bounds are the defaults: what a release runs with.
    api_ = std::make_unique<ServiceProcess>(std::vector<std::string>{CHARGE_API_BIN},
                                            FastChargeApiEnv(db_->url(), sim_->port(), kAcquirerKey));
    ASSERT_NE(api_->admin_port(), 0) << api_->Output();
    ASSERT_TRUE(Eventually([&] { return HttpTestClient(api_->admin_port()).Get("/readyz").status() == 200; }))
        << api_->Output();
  }

  void TearDown() override {
    api_.reset();
    sim_.reset();
    fs::remove_all(dir_);
  }

  std::unique_ptr<PgTestDatabase> db_;
  fs::path dir_;
  std::unique_ptr<ServiceProcess> sim_;
  std::unique_ptr<ServiceProcess> api_;
};

// The old admin port held 256 idle connections for 60 s and closed every connection beyond them, the
// kubelet's included: the probes failed and the pod was restarted. Now one address holds 8
// (admin.max_connections_per_client), for 5 s (admin.idle_timeout).
TEST_F(PodTakedownE2E, ThreeHundredIdleSocketsFromOnePodLeaveTheProbesAnswered) {
  constexpr std::size_t kFlood = 300;
  const auto flood_started = Clock::now();
  std::vector<std::unique_ptr<Socket>> flood;
  for (std::size_t i = 0; i < kFlood; ++i) {
    flood.push_back(std::make_unique<Socket>(ConnectFrom("127.0.0.1", api_->admin_port())));
    ASSERT_GE(flood.back()->fd, 0) << "connect " << i << ": " << std::strerror(errno);
  }
  std::vector<bool> closed(kFlood, false);
  const auto still_open = [&] {
    int open = 0;
    for (std::size_t i = 0; i < kFlood; ++i) {
      if (!closed[i]) closed[i] = ClosedByServer(flood[i]->fd, 0ms);
      if (!closed[i]) ++open;
    }
    return open;
  };
  // 8, or 7 if the server had not yet seen SetUp's /readyz connection from the same address close.
  ASSERT_TRUE(Eventually([&] { return still_open() <= 8; }, 3s)) << still_open() << " still open";
  EXPECT_GE(still_open(), 7);

  // The kubelet (another address) probes while the 8 are held: every probe answered, and at once.
  Clock::duration slowest{};
  for (int round = 0; round < 10; ++round) {
    for (const char* path : {"/healthz", "/readyz"}) {
      const auto probe = ProbeFrom("127.0.0.2", api_->admin_port(), path);
      EXPECT_THAT(probe.answer, HasSubstr("HTTP/1.1 200")) << path << " under the flood";
      slowest = std::max(slowest, probe.took);
    }
  }
  EXPECT_LT(slowest, 500ms) << "the kubelet's default probe timeout is 1 s";
  // A second flooding pod takes its own 8, no more; a third address still gets in.
  std::vector<std::unique_ptr<Socket>> second;
  for (int i = 0; i < 20; ++i) second.push_back(std::make_unique<Socket>(ConnectFrom("127.0.0.3", api_->admin_port())));
  EXPECT_THAT(ProbeFrom("127.0.0.4", api_->admin_port(), "/healthz").answer, HasSubstr("HTTP/1.1 200"));

  // The held ones are closed after the idle timeout, not before.
  EXPECT_TRUE(Eventually([&] { return still_open() == 0; }, 8s)) << still_open() << " still open";
  const auto all_closed = Clock::now() - flood_started;
  EXPECT_GE(all_closed, 4500ms);
  EXPECT_LT(all_closed, 7s);
  std::cout << "[ figures  ] slowest probe under the flood "
            << std::chrono::duration_cast<std::chrono::microseconds>(slowest).count() << " us; the flood's last socket closed "
            << Ms(all_closed) << " ms after it began\n";
}

// Sends a chunked request whose chunk-size line never ends, 64 KB at a time up to 64 MB, while a reader
// collects the answer; samples charge-api's RSS every megabyte.
struct EndlessLine {
  std::string answer;
  std::size_t sent = 0;
  int send_errno = 0;
  long rss_before_kb = 0;
  long rss_peak_kb = 0;
  Clock::duration to_answer{};  // from the line's first byte to the end of the answer (the server shut its side)
};

EndlessLine SendEndlessChunkLine(pid_t pid, std::uint16_t port) {
  constexpr std::size_t kTotal = 64u << 20, kBlock = 64u << 10;
  EndlessLine result;
  result.rss_before_kb = result.rss_peak_kb = RssKb(pid);
  Socket socket(ConnectFrom("127.0.0.1", port));
  if (socket.fd < 0) return result;
  const timeval send_timeout{10, 0};
  ::setsockopt(socket.fd, SOL_SOCKET, SO_SNDTIMEO, &send_timeout, sizeof send_timeout);
  const std::string head = "POST /v1/charges HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n";
  ::send(socket.fd, head.data(), head.size(), MSG_NOSIGNAL);
  const auto started = Clock::now();
  std::thread reader([&] {
    result.answer = ReadAll(socket.fd, 20s);
    result.to_answer = Clock::now() - started;
  });
  const std::string block(kBlock, 'f');  // hex digits, and no CRLF ever
  while (result.sent < kTotal) {
    const auto n = ::send(socket.fd, block.data(), block.size(), MSG_NOSIGNAL);
    if (n < 0) {
      result.send_errno = errno;
      break;
    }
    const auto before = result.sent;
    result.sent += static_cast<std::size_t>(n);
    if (result.sent / (1u << 20) != before / (1u << 20)) result.rss_peak_kb = std::max(result.rss_peak_kb, RssKb(pid));
  }
  result.rss_peak_kb = std::max(result.rss_peak_kb, RssKb(pid));
  reader.join();
  return result;
}

// Boost 1.81's Beast buffers a chunk-size line until it ends, and the old read buffer had no limit: 64 MB
// of it, no key needed, grew charge-api by 64 MB or more, and enough of them OOM-killed the pod. Now the
// line meets the read buffer's bound (header + body limit + 4 KB) and is answered 400 and closed.
TEST_F(PodTakedownE2E, AChunkLineThatNeverEndsIsRefusedWithMemoryFlatOnBothPorts) {
  const pid_t pid = api_->process().pid();
  for (const auto port : {api_->port(), api_->admin_port()}) {
    const auto line = SendEndlessChunkLine(pid, port);
    const auto growth_kb = line.rss_peak_kb - line.rss_before_kb;
    std::cout << "[ figures  ] port " << (port == api_->port() ? "api" : "admin") << ": sent "
              << line.sent / 1024 << " KB before the server closed (" << std::strerror(line.send_errno)
              << "), answered after " << Ms(line.to_answer) << " ms, RSS " << line.rss_before_kb << " kB -> peak "
              << line.rss_peak_kb << " kB (+" << growth_kb << " kB)\n";
    EXPECT_THAT(line.answer, HasSubstr("HTTP/1.1 400")) << "port " << port;
    EXPECT_THAT(line.answer, HasSubstr("does not end within")) << "port " << port;
    EXPECT_TRUE(line.send_errno == EPIPE || line.send_errno == ECONNRESET)
        << "the server must close the connection, not take all 64 MB: " << std::strerror(line.send_errno);
    EXPECT_LT(line.sent, 32u << 20) << "port " << port;
    EXPECT_LT(growth_kb, 4 * 1024) << "port " << port;
    EXPECT_LT(line.to_answer, 5s) << "port " << port;
  }
  // The pod is still here and serving.
  EXPECT_EQ(HttpTestClient(api_->admin_port()).Get("/healthz").status(), 200u);
}

}  // namespace
}  // namespace charge_outbox::testing
