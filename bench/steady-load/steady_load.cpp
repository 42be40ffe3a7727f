// steady_load: what the relay costs, and how late its events are, at a steady rate of charge events.
//
// Writers run the charge store's own two statements (charge_begin, then charge_complete: the intent and
// the capture, two events per charge, taken verbatim from PgChargeStoreStatements) at a fixed arrival
// rate: charge i is scheduled at start + i / (RATE / 2), on several connections so that one slow commit
// does not hold back the next slot. A Kafka consumer subscribed before the first write measures each event
// from the return of the statement that committed it to its arrival (commit -> consumed).
//
// Over the SECONDS after WARMUP it also reads, from /proc, the CPU time (user + system) of:
//   - every PostgreSQL process: the postmaster's children alive, plus those that ended (the postmaster's
//     cutime/cstime), so the WAL writer, the checkpointer and autovacuum workers count;
//   - the backends of the relay's sessions (application_name outbox-relay in pg_stat_activity);
//   - the writers' own backends (application_name steady-load): most of PostgreSQL's CPU, and most of its
//     drift from run to run on a shared machine, which the rest (the relay's sessions, autovacuum, the WAL
//     writer, the checkpointer) can be read without;
//   - the relay process itself (RELAY_PID, 0: none).
//
//   steady_load DATABASE_URL BOOTSTRAP|- TOPIC RATE SECONDS WARMUP WRITERS RELAY_PID MERCHANT
//
// BOOTSTRAP "-": no consumer (the writers-only baseline: the relay is stopped). RELAY_PID 0 with a BOOTSTRAP:
// the stand-in baseline, the relay stopped and the same Kafka traffic made without the database: each writer
// produces its event itself once the statement returns (the relay's producer settings, a value of the size
// of a charge event and the CloudEvents headers), and the consumer reads them, so that the broker, the
// consumer and a producer take the same cores from PostgreSQL as with the relay, on this one machine. Prints
// `RESULT rate=... events=... p50_ms=... p99_ms=... max_ms=... produced_p50_ms=... produced_p99_ms=...
// kafka_p99_ms=... pg_cpu_s=... writers_pg_cpu_s=... relay_sessions_cpu_s=... relay_cpu_s=... seconds=...`
// (latencies -1 without a consumer): produced_* is commit -> the relay's produce call (the relay's half),
// kafka_p99_ms the produce call -> consumed (Kafka's half), both from the message's CreateTime, in whole
// milliseconds.
#include <librdkafka/rdkafka.h>
#include <unistd.h>

#include <pqxx/pqxx>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "charge_outbox/acquirer/retry_policy.hpp"
#include "charge_outbox/charges/charge.hpp"
#include "charge_outbox/charges/charge_store.hpp"
#include "latest_consumer.hpp"

namespace {

using Clock = std::chrono::system_clock;

std::int64_t NowMicros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(Clock::now().time_since_epoch()).count();
}

// /proc/PID/stat: utime, stime, cutime, cstime (fields 14 to 17) and the parent (field 4), in seconds.
struct ProcTimes {
  int ppid = 0;
  double own = 0;       // utime + stime
  double children = 0;  // cutime + cstime: children that ended and were waited for
  bool ok = false;
};

ProcTimes ReadProc(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ProcTimes t;
  const auto close = text.rfind(')');  // the command may hold spaces and parentheses
  if (close == std::string::npos) return t;
  std::istringstream fields(text.substr(close + 2));
  std::vector<std::string> f;  // f[0] is field 3 (state)
  for (std::string s; fields >> s;) f.push_back(s);
  if (f.size() < 15) return t;
  const double tick = static_cast<double>(::sysconf(_SC_CLK_TCK));
  t.ppid = std::stoi(f[1]);
  t.own = (std::stod(f[11]) + std::stod(f[12])) / tick;
  t.children = (std::stod(f[13]) + std::stod(f[14])) / tick;
  t.ok = true;
  return t;
}

// Every PostgreSQL process of one server: the postmaster (with its ended children) and its live children.
double PostgresCpu(int postmaster) {
  const auto root = ReadProc(postmaster);
  double total = root.own + root.children;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const auto name = entry.path().filename().string();
    if (name.empty() || !std::all_of(name.begin(), name.end(), ::isdigit)) continue;
    const auto t = ReadProc(std::stoi(name));
    if (t.ok && t.ppid == postmaster) total += t.own;
  }
  return total;
}

double CpuOf(const std::vector<int>& pids) {
  double total = 0;
  for (int pid : pids) total += ReadProc(pid).own;
  return total;
}

// A number field of a payload, whatever the spacing: {"...","sequence":2,...}.
std::int64_t Field(std::string_view text, std::string_view name) {
  const auto key = "\"" + std::string(name) + "\"";
  auto at = text.find(key);
  if (at == std::string_view::npos) return -1;
  at = text.find_first_not_of(" :", at + key.size());
  if (at == std::string_view::npos) return -1;
  return std::stoll(std::string(text.substr(at, 20)));
}

// The stand-in baseline's producer: the relay's settings that shape the broker's work (kafka/rdkafka_publisher,
// outbox-relay's relay_config).
rd_kafka_t* StandInProducer(const std::string& bootstrap) {
  return charge_outbox::bench::NewClient(RD_KAFKA_PRODUCER, {{"bootstrap.servers", bootstrap},
                                                             {"enable.idempotence", "true"},
                                                             {"acks", "all"},
                                                             {"compression.type", "lz4"},
                                                             {"linger.ms", "5"},
                                                             {"socket.nagle.disable", "true"}});
}

// One event as the stand-in sends it: keyed by the charge, its sequence in the value, padded to a charge
// event's size (about 340 bytes), with headers shaped like the relay's CloudEvents attributes.
void ProduceStandIn(rd_kafka_t* producer, const std::string& topic, const std::string& public_id, int sequence,
                    const std::string& traceparent) {
  std::string value = "{\"charge_id\":\"" + public_id + "\",\"sequence\":" + std::to_string(sequence) + ",\"pad\":\"";
  value.append(value.size() < 330 ? 330 - value.size() : 0, 'x');
  value += "\"}";
  const std::string id = public_id + "-" + std::to_string(sequence);
  rd_kafka_headers_t* headers = rd_kafka_headers_new(6);
  for (const auto& [name, text] : std::vector<std::pair<const char*, std::string>>{
           {"ce_specversion", "1.0"},
           {"ce_id", id},
           {"ce_source", "/charge-api/steady-load"},
           {"ce_type", sequence == 1 ? "charge.pending" : "charge.captured"},
           {"ce_time", "2026-12-03T00:00:00.000000Z"},
           {"traceparent", traceparent}}) {
    rd_kafka_header_add(headers, name, -1, text.data(), static_cast<ssize_t>(text.size()));
  }
  // librdkafka's RD_KAFKA_V_* macros are C casts; they are its public API.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wold-style-cast"
  const auto err = rd_kafka_producev(
      producer, RD_KAFKA_V_TOPIC(topic.c_str()), RD_KAFKA_V_KEY(const_cast<char*>(public_id.data()), public_id.size()),
      RD_KAFKA_V_VALUE(value.data(), value.size()), RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
      RD_KAFKA_V_HEADERS(headers), RD_KAFKA_V_END);
#pragma GCC diagnostic pop
  if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
    rd_kafka_headers_destroy(headers);  // owned by the message only once produced
    throw std::runtime_error(std::string("stand-in produce: ") + rd_kafka_err2str(err));
  }
  rd_kafka_poll(producer, 0);  // serve delivery reports as we go
}

double Percentile(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return -1;
  return sorted[std::min(sorted.size() - 1, static_cast<std::size_t>(p * static_cast<double>(sorted.size())))];
}

// When each event's commit returned, by charge public id and sequence.
class CommitTimes {
 public:
  void Record(const std::string& public_id, int sequence, std::int64_t at_us) {
    std::lock_guard lock(mutex_);
    times_[public_id][static_cast<std::size_t>(sequence - 1)] = at_us;
  }
  std::int64_t Get(const std::string& public_id, int sequence) {
    std::lock_guard lock(mutex_);
    const auto it = times_.find(public_id);
    return (it == times_.end() || sequence < 1 || sequence > 2) ? 0 : it->second[static_cast<std::size_t>(sequence - 1)];
  }

 private:
  std::mutex mutex_;
  std::unordered_map<std::string, std::array<std::int64_t, 2>> times_;
};

struct Args {
  std::string url, bootstrap, topic, merchant;
  double rate = 1000;  // events/s
  int seconds = 30, warmup = 5, writers = 8, relay_pid = 0;
};

}  // namespace

int main(int argc, char** argv) {
  if (argc != 10) {
    std::cerr << "usage: steady_load DATABASE_URL BOOTSTRAP|- TOPIC RATE SECONDS WARMUP WRITERS RELAY_PID MERCHANT\n";
    return 2;
  }
  const Args a{.url = argv[1],
               .bootstrap = argv[2],
               .topic = argv[3],
               .merchant = argv[9],
               .rate = std::stod(argv[4]),
               .seconds = std::stoi(argv[5]),
               .warmup = std::stoi(argv[6]),
               .writers = std::stoi(argv[7]),
               .relay_pid = std::stoi(argv[8])};
  const bool consume = a.bootstrap != "-";
  const double charge_rate = a.rate / 2;
  const auto charges = static_cast<std::int64_t>(charge_rate * (a.seconds + a.warmup));

  std::map<std::string, std::string> sql;
  for (const auto& s : charge_outbox::charges::PgChargeStoreStatements()) sql[s.name] = s.sql;

  int postmaster = 0;
  std::vector<int> relay_sessions;
  {
    pqxx::connection conn(a.url);
    pqxx::nontransaction tx(conn);
    postmaster = ReadProc(tx.exec1("SELECT pg_backend_pid()")[0].as<int>()).ppid;
    for (const auto& row : tx.exec("SELECT pid FROM pg_stat_activity WHERE application_name = 'outbox-relay'")) {
      relay_sessions.push_back(row[0].as<int>());
    }
  }
  if (consume && a.relay_pid != 0 && relay_sessions.empty()) {
    std::cerr << "no session with application_name outbox-relay: is the relay running on this database?\n";
    return 2;
  }

  rd_kafka_t* consumer =
      consume ? charge_outbox::bench::LatestConsumer(a.bootstrap, a.topic, "steady-" + std::to_string(NowMicros()))
              : nullptr;
  rd_kafka_t* stand_in = consume && a.relay_pid == 0 ? StandInProducer(a.bootstrap) : nullptr;

  const auto start_us = NowMicros() + 200'000;
  const double interval_us = 1e6 / charge_rate;
  const auto measure_from_us = start_us + static_cast<std::int64_t>(a.warmup) * 1'000'000;
  const auto end_us = measure_from_us + static_cast<std::int64_t>(a.seconds) * 1'000'000;
  CommitTimes committed;
  std::atomic<std::int64_t> next{0};
  std::atomic<std::int64_t> failures{0};
  std::vector<std::thread> threads;
  for (int w = 0; w < a.writers; ++w) {
    threads.emplace_back([&] {
      pqxx::connection conn(a.url + (a.url.find('?') == std::string::npos ? "?" : "&") +
                            "application_name=steady-load");
      conn.prepare("begin", sql.at("charge_begin"));
      conn.prepare("complete", sql.at("charge_complete"));
      const std::string fingerprint(64, '0');
      const std::string traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
      while (true) {
        const auto i = next.fetch_add(1);
        if (i >= charges) return;
        const auto sched = start_us + static_cast<std::int64_t>(static_cast<double>(i) * interval_us);
        const auto wait = sched - NowMicros();
        if (wait > 0) std::this_thread::sleep_for(std::chrono::microseconds{wait});
        try {
          pqxx::nontransaction tx(conn);
          const auto key = "steady-" + std::to_string(start_us) + "-" + std::to_string(i);
          // charge_begin: merchant, key, fingerprint, order, amount, currency, payment method, description,
          // owner, lease ms, traceparent, attempt 1's request id, operation, actor (as bench/charge-api's script).
          const auto begun =
              tx.exec_prepared1("begin", a.merchant, key, fingerprint, key, 25000, "BRL", "pm_tok_visa", "steady",
                                key, 30000, traceparent, charge_outbox::acquirer::NewRequestId(), "capture",
                                "charge-api");
          const auto id = begun[0].as<std::string>();
          const auto public_id = charge_outbox::charges::PublicChargeId(id);
          committed.Record(public_id, 1, NowMicros());
          if (stand_in != nullptr) ProduceStandIn(stand_in, a.topic, public_id, 1, traceparent);
          // charge_complete: id, status, capture id, decline, reason, response status, body, traceparent,
          // attempt no, its elapsed ms, outcome, evidence, http status, owner, deadline ms, the body's time mark.
          const char* null = nullptr;  // libpqxx 6 binds a null char pointer as NULL
          const std::string mark(charge_outbox::charges::kDatabaseTimeMark);
          tx.exec_prepared("complete", id, "captured", "cap-" + key, null, null, 201,
                           "{\"status\":\"captured\"," + mark + "}", traceparent, 1, 100, "captured", "approved",
                           201, null, 3600000, mark);
          committed.Record(public_id, 2, NowMicros());
          if (stand_in != nullptr) ProduceStandIn(stand_in, a.topic, public_id, 2, traceparent);
        } catch (const std::exception& e) {
          ++failures;
          std::cerr << "write failed: " << e.what() << "\n";
        }
      }
    });
  }

  // The CPU window: from the end of the warm-up to the end of the schedule.
  std::this_thread::sleep_for(std::chrono::microseconds{measure_from_us - NowMicros()});
  // The writers connected during the warm-up: their backends are known by now.
  std::vector<int> writer_backends;
  {
    pqxx::connection conn(a.url);
    pqxx::nontransaction tx(conn);
    for (const auto& row : tx.exec("SELECT pid FROM pg_stat_activity WHERE application_name = 'steady-load'")) {
      writer_backends.push_back(row[0].as<int>());
    }
  }
  const double pg0 = PostgresCpu(postmaster), sessions0 = CpuOf(relay_sessions), writers0 = CpuOf(writer_backends);
  const double relay0 = a.relay_pid != 0 ? ReadProc(a.relay_pid).own : 0;
  const auto window_start = NowMicros();

  // What arrived and when. The relay may publish an event before its writer's statement call has returned
  // and recorded the commit, so the two are matched after the run (a negative difference counts as 0).
  struct Consumed {
    std::string charge;
    int sequence;
    std::int64_t at_us;
    std::int64_t produced_ms;  // the relay's produce call (the message's CreateTime), -1 if the broker gave none
  };
  std::vector<Consumed> consumed;
  std::int64_t received = 0;
  bool sampled = false;
  double pg1 = 0, sessions1 = 0, writers1 = 0, relay1 = 0;
  std::int64_t window_end = 0;
  auto sample = [&] {
    pg1 = PostgresCpu(postmaster);
    sessions1 = CpuOf(relay_sessions);
    writers1 = CpuOf(writer_backends);
    relay1 = a.relay_pid != 0 ? ReadProc(a.relay_pid).own : 0;
    window_end = NowMicros();
    sampled = true;
  };
  const std::int64_t expected = charges * 2;
  while (true) {
    const auto now = NowMicros();
    if (!sampled && now >= end_us) sample();
    if (!consume) {
      if (sampled) break;
      std::this_thread::sleep_for(std::chrono::milliseconds{5});
      continue;
    }
    if ((received >= expected && sampled) || now >= end_us + 10'000'000) break;
    rd_kafka_message_t* m = rd_kafka_consumer_poll(consumer, 5);
    if (m == nullptr) continue;
    if (m->err == RD_KAFKA_RESP_ERR_NO_ERROR && m->key != nullptr) {
      const auto sequence = Field({static_cast<const char*>(m->payload), m->len}, "sequence");
      if (sequence == 1 || sequence == 2) {
        rd_kafka_timestamp_type_t type;
        const auto produced_ms = rd_kafka_message_timestamp(m, &type);
        consumed.push_back({std::string(static_cast<const char*>(m->key), m->key_len), static_cast<int>(sequence),
                            NowMicros(), type == RD_KAFKA_TIMESTAMP_CREATE_TIME ? produced_ms : -1});
        ++received;
      }
    }
    rd_kafka_message_destroy(m);
  }
  if (!sampled) sample();
  for (auto& t : threads) t.join();
  if (stand_in != nullptr) {
    rd_kafka_flush(stand_in, 10'000);
    rd_kafka_destroy(stand_in);
  }
  if (consumer != nullptr) {
    rd_kafka_consumer_close(consumer);
    rd_kafka_destroy(consumer);
  }

  std::vector<double> latencies_ms;
  std::vector<double> to_produce_ms;  // commit -> the relay's produce call: where a late event waited
  std::vector<double> from_produce_ms;  // the produce call -> consumed: Kafka's half (CreateTime is in ms)
  std::int64_t unmatched = 0;  // an event of another run's charge (none expected: keys carry this run's start)
  for (const auto& c : consumed) {
    const auto commit = committed.Get(c.charge, c.sequence);
    if (commit == 0) {
      ++unmatched;
    } else if (commit >= measure_from_us && commit < end_us) {
      latencies_ms.push_back(std::max(0.0, static_cast<double>(c.at_us - commit) / 1000.0));
      if (c.produced_ms >= 0) {
        to_produce_ms.push_back(std::max(0.0, static_cast<double>(c.produced_ms * 1000 - commit) / 1000.0));
        from_produce_ms.push_back(std::max(0.0, static_cast<double>(c.at_us - c.produced_ms * 1000) / 1000.0));
      }
    }
  }
  std::sort(latencies_ms.begin(), latencies_ms.end());
  std::sort(to_produce_ms.begin(), to_produce_ms.end());
  std::sort(from_produce_ms.begin(), from_produce_ms.end());
  const double window_s = static_cast<double>(window_end - window_start) / 1e6;
  std::printf("written %lld charges (%lld write failures), %lld events received of %lld (%lld not this run's)\n",
              static_cast<long long>(charges), static_cast<long long>(failures.load()),
              static_cast<long long>(received - unmatched), static_cast<long long>(expected),
              static_cast<long long>(unmatched));
  std::printf(
      "RESULT rate=%.0f events=%zu p50_ms=%.2f p99_ms=%.2f max_ms=%.2f produced_p50_ms=%.2f produced_p99_ms=%.2f "
      "kafka_p99_ms=%.2f pg_cpu_s=%.3f writers_pg_cpu_s=%.3f relay_sessions_cpu_s=%.3f relay_cpu_s=%.3f "
      "seconds=%.3f\n",
      a.rate, latencies_ms.size(), Percentile(latencies_ms, 0.5), Percentile(latencies_ms, 0.99),
      latencies_ms.empty() ? -1.0 : latencies_ms.back(), Percentile(to_produce_ms, 0.5),
      Percentile(to_produce_ms, 0.99), Percentile(from_produce_ms, 0.99), pg1 - pg0, writers1 - writers0,
      sessions1 - sessions0, relay1 - relay0, window_s);
  // Events never seen count as failures: a benchmark must not report the speed of losses.
  const bool complete = !consume || received - unmatched == expected;
  return failures.load() == 0 && complete ? 0 : 1;
}
