// What the HA topology's faults cost, as the clients and the outbox saw it: for each failover, the time
// from the kill to the first write on the new primary and to the first charge answered 201, and the 503s
// answered around it (and of those, the ones sent after the new primary already accepted writes: the goal
// is none); for each broker loss, how far the outbox fell behind (the age of its oldest unpublished event,
// sampled from the database).
#pragma once

#include <atomic>
#include <chrono>
#include <mutex>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

#include "chaos_faults.hpp"
#include "chaos_workload.hpp"

namespace charge_outbox::chaos {

struct LagSample {
  std::chrono::steady_clock::time_point at;
  double oldest_unpublished_s = 0;  // 0: nothing waiting
};

// Samples the outbox's lag every 250 ms through `database_url` (direct, not through the proxies), from
// Start to Stop. A sample the database could not answer (a failover) is skipped.
class OutboxLagSampler {
 public:
  explicit OutboxLagSampler(std::string database_url) : url_(std::move(database_url)) {}
  ~OutboxLagSampler() { Stop(); }
  void Start();
  void Stop();
  std::vector<LagSample> samples() const;

 private:
  std::string url_;
  std::atomic<bool> stop_{false};
  mutable std::mutex mutex_;
  std::vector<LagSample> samples_;
  std::thread thread_;
};

void PrintFailovers(const std::vector<FailoverRecord>& failovers, const std::vector<Attempt>& attempts,
                    const std::vector<LagSample>& lag, std::ostream& out);
void PrintBrokerLosses(const std::vector<BrokerLossRecord>& losses, const std::vector<LagSample>& lag,
                       std::int64_t redeliveries, std::ostream& out);

}  // namespace charge_outbox::chaos
