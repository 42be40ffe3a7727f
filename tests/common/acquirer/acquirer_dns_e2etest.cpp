// DNS failure through the real resolver: a name under .invalid (RFC 6761) never resolves, so the call
// must end as not_sent before any connection. e2e because it asks the machine's DNS resolver, which
// may be off the loopback interface.
#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>

#include "charge_outbox/acquirer/http_acquirer_client.hpp"
#include "printers.hpp"
#include "run_sync.hpp"

namespace charge_outbox::acquirer {
namespace {

TEST(HttpAcquirerClientDns, AnUnresolvableHostIsNotSent) {
  boost::asio::io_context io;
  AcquirerClientConfig config;
  config.base_url = "http://acquirer.charge-outbox-test.invalid:8080";
  config.api_key = "sk_test";
  config.connect_timeout = std::chrono::seconds{10};
  config.request_timeout = std::chrono::seconds{10};
  HttpAcquirerClient client(io.get_executor(), config);
  const auto outcome = testing::RunSync(
      io, client.Capture(CaptureRequest{"k-1", 100, "BRL", "ch_1", "pm_tok_visa"}, "req-1"), std::chrono::seconds{30});
  EXPECT_EQ(outcome.kind, OutcomeKind::kNotSent) << outcome.detail;
  // The resolver either answers "no such name" or, with no DNS reachable, runs out of time: both before
  // any connection.
  EXPECT_TRUE(outcome.transport == TransportStatus::kResolveFailed ||
              outcome.transport == TransportStatus::kResolveTimedOut)
      << ToString(outcome.transport);
  EXPECT_EQ(outcome.evidence(), EvidenceClass::kNotSent);
}

}  // namespace
}  // namespace charge_outbox::acquirer
