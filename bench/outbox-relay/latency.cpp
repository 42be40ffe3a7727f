// outbox_relay_latency: end-to-end latency of the outbox relay, commit -> consumed, at a fixed arrival rate.
//
// Writers insert one event per slot, slot i being scheduled at start + i / rate, each in its own
// transaction (as charge-api does), on several connections so that one slow commit does not hold back the
// next slot. The event's payload carries its scheduled time; a consumer subscribed before the first write
// measures now - scheduled for every event. Measuring from the schedule, not from the insert, keeps a
// stall visible (coordinated omission): events delayed behind it count as late, not as never sent.
//
//   outbox_relay_latency DATABASE_URL BOOTSTRAP TOPIC [RATE=1000] [SECONDS=30] [WARMUP_SECONDS=5] [WRITERS=8]
//
// Prints every figure, then `RESULT rate=... events=... p50_ms=... p99_ms=... p999_ms=... max_ms=...` (from
// the scheduled time), and `COMMIT_TO_CONSUMED ...` (from the moment the writer's commit returned: the
// relay's and Kafka's share, without the writer's own commit time).
#include <librdkafka/rdkafka.h>

#include <pqxx/pqxx>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "latest_consumer.hpp"

namespace {

using Clock = std::chrono::system_clock;

std::int64_t NowMicros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(Clock::now().time_since_epoch()).count();
}

std::string NewUuid(std::mt19937_64& random) {
  const auto hi = random();
  const auto lo = random();
  char buf[40];
  std::snprintf(buf, sizeof buf, "%08x-%04x-4%03x-8%03x-%012llx", static_cast<unsigned>(hi >> 32),
                static_cast<unsigned>((hi >> 16) & 0xFFFF), static_cast<unsigned>(hi & 0xFFF),
                static_cast<unsigned>((lo >> 52) & 0xFFF), static_cast<unsigned long long>(lo & 0xFFFFFFFFFFFFull));
  return buf;
}

// A number field of the payload text, whatever the spacing: {"...", "sched_us": 1234, ...}.
std::int64_t Field(const char* data, std::size_t size, const std::string& name) {
  const std::string_view text(data, size);
  const auto key = "\"" + name + "\"";
  auto at = text.find(key);
  if (at == std::string_view::npos) return -1;
  at = text.find_first_not_of(" :", at + key.size());
  if (at == std::string_view::npos) return -1;
  return std::stoll(std::string(text.substr(at, 20)));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::cerr << "usage: outbox_relay_latency DATABASE_URL BOOTSTRAP TOPIC [RATE] [SECONDS] [WARMUP] [WRITERS]\n";
    return 2;
  }
  const std::string url = argv[1];
  const std::string bootstrap = argv[2];
  const std::string topic = argv[3];
  const double rate = argc > 4 ? std::stod(argv[4]) : 1000;
  const int seconds = argc > 5 ? std::stoi(argv[5]) : 30;
  const int warmup = argc > 6 ? std::stoi(argv[6]) : 5;
  const int writers = argc > 7 ? std::stoi(argv[7]) : 8;
  const auto total = static_cast<std::int64_t>(rate * (seconds + warmup));

  // The consumer first: it must own every partition before the first event is written.
  rd_kafka_t* consumer = nullptr;
  try {
    consumer = charge_outbox::bench::LatestConsumer(bootstrap, topic, "latency-" + std::to_string(NowMicros()));
  } catch (const std::exception& e) {
    std::cerr << e.what() << "\n";
    return 2;
  }

  const auto start_us = NowMicros() + 200'000;
  const double interval_us = 1e6 / rate;
  const auto measure_from_us = start_us + static_cast<std::int64_t>(warmup) * 1'000'000;
  std::atomic<std::int64_t> next{0};
  // When each slot's commit returned. The relay may publish an event before its writer's commit call has
  // returned, so these are read after the run (and a negative difference counts as 0).
  std::vector<std::atomic<std::int64_t>> committed_us(static_cast<std::size_t>(total));
  std::atomic<std::int64_t> failures{0};
  std::vector<std::thread> threads;
  for (int w = 0; w < writers; ++w) {
    threads.emplace_back([&, w] {
      pqxx::connection conn(url);
      conn.prepare("ins",
                   "INSERT INTO outbox (id, aggregateid, type, payload, sequence, shard)"
                   " VALUES (gen_random_uuid(), charge_public_id($1::uuid), 'payments.charge.initiated.v1',"
                   "         json_strip_nulls(json_build_object('id', charge_public_id($1::uuid), 'sequence', 1,"
                   "                            'sched_us', $2::bigint, 'slot', $3::bigint, 'amount', 25000,"
                   "                            'currency', 'BRL', 'status', 'pending')),"
                   "         1, outbox_shard($1::uuid))");
      std::mt19937_64 random(std::random_device{}() + static_cast<unsigned>(w));
      while (true) {
        const auto i = next.fetch_add(1);
        if (i >= total) return;
        const auto sched = start_us + static_cast<std::int64_t>(static_cast<double>(i) * interval_us);
        const auto wait = sched - NowMicros();
        if (wait > 0) std::this_thread::sleep_for(std::chrono::microseconds{wait});
        try {
          pqxx::work tx(conn);
          tx.exec_prepared("ins", NewUuid(random), sched, i);
          tx.commit();
          committed_us[static_cast<std::size_t>(i)] = NowMicros();
        } catch (const std::exception& e) {
          ++failures;
          std::cerr << "insert failed: " << e.what() << "\n";
        }
      }
    });
  }

  std::vector<double> latencies_ms;
  latencies_ms.reserve(static_cast<std::size_t>(rate * seconds) + 16);
  std::vector<std::pair<std::int64_t, std::int64_t>> consumed_at;  // slot, when consumed
  std::int64_t received = 0;
  const auto end_us = start_us + static_cast<std::int64_t>(seconds + warmup) * 1'000'000;
  // Wait for everything written, plus a grace of 10s for the last ones.
  while (received < total && NowMicros() < end_us + 10'000'000) {
    rd_kafka_message_t* m = rd_kafka_consumer_poll(consumer, 50);
    if (m == nullptr) continue;
    if (m->err == RD_KAFKA_RESP_ERR_NO_ERROR) {
      const auto now = NowMicros();
      const auto sched = Field(static_cast<const char*>(m->payload), m->len, "sched_us");
      if (sched >= start_us) {
        ++received;
        if (sched >= measure_from_us) {
          latencies_ms.push_back(static_cast<double>(now - sched) / 1000.0);
          consumed_at.emplace_back(Field(static_cast<const char*>(m->payload), m->len, "slot"), now);
        }
      }
    }
    rd_kafka_message_destroy(m);
  }
  for (auto& t : threads) t.join();
  rd_kafka_consumer_close(consumer);
  rd_kafka_destroy(consumer);

  const auto expected_measured = static_cast<std::size_t>(rate * seconds);
  std::vector<double> from_commit_ms;
  for (const auto& [slot, at] : consumed_at) {
    if (slot >= 0 && slot < total) {
      from_commit_ms.push_back(std::max(0.0, static_cast<double>(at - committed_us[static_cast<std::size_t>(slot)]) / 1000.0));
    }
  }
  std::sort(latencies_ms.begin(), latencies_ms.end());
  std::sort(from_commit_ms.begin(), from_commit_ms.end());
  auto pct_of = [](const std::vector<double>& v, double p) {
    if (v.empty()) return -1.0;
    const auto idx = std::min(v.size() - 1, static_cast<std::size_t>(p * static_cast<double>(v.size())));
    return v[idx];
  };
  auto pct = [&](double p) { return pct_of(latencies_ms, p); };
  std::printf("written %lld (insert failures %lld), received %lld; measured %zu of %zu after a %ds warm-up\n",
              static_cast<long long>(total), static_cast<long long>(failures.load()), static_cast<long long>(received),
              latencies_ms.size(), expected_measured, warmup);
  std::printf("RESULT rate=%.0f seconds=%d events=%zu p50_ms=%.1f p90_ms=%.1f p99_ms=%.1f p999_ms=%.1f max_ms=%.1f\n",
              rate, seconds, latencies_ms.size(), pct(0.5), pct(0.9), pct(0.99), pct(0.999),
              latencies_ms.empty() ? -1.0 : latencies_ms.back());
  std::printf("COMMIT_TO_CONSUMED p50_ms=%.1f p90_ms=%.1f p99_ms=%.1f p999_ms=%.1f max_ms=%.1f\n",
              pct_of(from_commit_ms, 0.5), pct_of(from_commit_ms, 0.9), pct_of(from_commit_ms, 0.99),
              pct_of(from_commit_ms, 0.999), from_commit_ms.empty() ? -1.0 : from_commit_ms.back());
  // Events never seen count as failures: a benchmark must not report the speed of losses.
  return (failures.load() == 0 && latencies_ms.size() == expected_measured) ? 0 : 1;
}
