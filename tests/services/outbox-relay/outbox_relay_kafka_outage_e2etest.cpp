// Kafka stopped for 30 s while events keep coming, then restarted: nothing is lost, per-charge order
// holds, and the lag gauge (read from the table) grows during the outage and recovers after it.
//
// This suite needs a broker it may stop, so it starts its own: the same `kafka_start`/`kafka_stop`
// functions of deploy/local/lib/kafka.sh that tests/run uses, on free ports with a state directory of its
// own, from the jars tests/run already fetched. The shared broker of the other suites is never touched.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <thread>

#include "relay_fixture.hpp"
#include "test_env.hpp"

namespace charge_outbox::testing {
namespace {

using namespace std::chrono_literals;
using ::testing::IsEmpty;
namespace fs = std::filesystem;

int FreePort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

// A single-node KRaft broker of this test's own, driven through deploy/local/lib/kafka.sh.
class OwnBroker {
 public:
  OwnBroker() : state_(fs::temp_directory_path() / UniqueName("relay_outage")), port_(FreePort()), cport_(FreePort()) {
    fs::create_directories(state_);
  }
  ~OwnBroker() {
    try {
      Run("kafka_stop " + state_.string());
    } catch (const std::exception& e) {
      std::fprintf(stderr, "stopping the test's own broker failed: %s\n", e.what());
    }
    std::error_code ignored;
    fs::remove_all(state_, ignored);
  }
  void Start() {
    const auto r = Run("kafka_start " + state_.string() + " " + std::to_string(port_) + " " + std::to_string(cport_) +
                       " && kafka_wait " + std::to_string(port_) + " 120 " + state_.string());
    if (r.exit_code != 0) throw std::runtime_error("own broker did not start:\n" + r.err);
  }
  void Stop() {
    const auto r = Run("kafka_stop " + state_.string());
    if (r.exit_code != 0) throw std::runtime_error("own broker did not stop:\n" + r.err);
  }
  std::string bootstrap() const { return "127.0.0.1:" + std::to_string(port_); }

 private:
  static ProcessResult Run(const std::string& script) {
    const std::string lib = std::string(PROJECT_SOURCE_DIR) + "/deploy/local/lib/";
    return RunProcess({"/bin/bash", "-c", "source " + lib + "common.sh && source " + lib + "kafka.sh && " + script}, {},
                      std::chrono::seconds{180});
  }
  fs::path state_;
  int port_;
  int cport_;
};

TEST(OutboxRelayKafkaOutageE2E, KafkaStoppedFor30SecondsLosesNothingAndTheLagRecovers) {
  OwnBroker broker;
  broker.Start();
  ::setenv("KAFKA_BOOTSTRAP_SERVERS", broker.bootstrap().c_str(), 1);  // KafkaTestTopic and the relay use it
  RelayE2E fixture("KafkaStoppedFor30Seconds", 3);
  auto relay = fixture.StartRelay({{"KAFKA_MESSAGE_TIMEOUT", "10s"}, {"RELAY_MAX_RETRY_BACKOFF", "1s"}});
  auto before = WriteChargeEvents(fixture.db().url(), 200, 2);
  ASSERT_TRUE(Eventually([&] { return Unpublished(fixture.db()) == 0; }, 60s)) << relay->Output();

  broker.Stop();
  const auto stopped_at = std::chrono::steady_clock::now();
  auto during = WriteChargeEvents(fixture.db().url(), 200, 2);
  // The relay is alive but stuck: the lag, read from the table, keeps growing.
  ASSERT_TRUE(Eventually([&] { return MetricValue(relay->admin_port(), "outbox_lag_seconds") >= 10.0; }, 30s));
  EXPECT_GT(Unpublished(fixture.db()), 0);
  std::this_thread::sleep_for(30s - (std::chrono::steady_clock::now() - stopped_at));  // the outage's length is the test
  broker.Start();

  ASSERT_TRUE(Eventually([&] { return Unpublished(fixture.db()) == 0; }, 90s)) << relay->Output();
  EXPECT_TRUE(Eventually([&] { return MetricValue(relay->admin_port(), "outbox_lag_seconds") == 0.0; }, 10s));
  EXPECT_GT(MetricValue(relay->admin_port(), "outbox_publish_errors_total{class=\"retriable\"}").value_or(0), 0.0);
  std::vector<WrittenEvent> all = before;
  all.insert(all.end(), during.begin(), during.end());
  const auto consumed = ConsumeAll(fixture.topic(), all, 60s);
  EXPECT_THAT(ContractViolations(consumed, all), IsEmpty());
}

}  // namespace
}  // namespace charge_outbox::testing
