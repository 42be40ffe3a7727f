#include "chaos_topology_report.hpp"

#include <pqxx/pqxx>

#include <algorithm>
#include <iomanip>
#include <optional>
#include <sstream>

namespace charge_outbox::chaos {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

std::optional<double> Median(std::vector<double> values) {
  if (values.empty()) return std::nullopt;
  std::sort(values.begin(), values.end());
  const auto n = values.size();
  return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

std::string Figure(std::optional<double> seconds) {
  if (!seconds) return "-";
  std::ostringstream s;
  s << std::fixed << std::setprecision(1) << *seconds;
  return s.str();
}

// The outbox's worst lag between `from` and `to`.
std::optional<double> WorstLag(const std::vector<LagSample>& lag, Clock::time_point from, Clock::time_point to) {
  std::optional<double> worst;
  for (const auto& s : lag) {
    if (s.at >= from && s.at <= to) worst = std::max(worst.value_or(0.0), s.oldest_unpublished_s);
  }
  return worst;
}

}  // namespace

void OutboxLagSampler::Start() {
  thread_ = std::thread([this] {
    std::optional<pqxx::connection> conn;
    while (!stop_) {
      try {
        if (!conn || !conn->is_open()) conn.emplace(url_ + "&connect_timeout=1");
        pqxx::nontransaction tx(*conn);
        const auto age = tx.exec1(
            "SELECT COALESCE(EXTRACT(epoch FROM clock_timestamp() - min(created_at)), 0)::float8 FROM outbox"
            " WHERE published_at IS NULL")[0].as<double>();
        std::lock_guard lock(mutex_);
        samples_.push_back(LagSample{Clock::now(), age});
      } catch (const std::exception&) {
        conn.reset();  // a failover: the next sample reconnects to whichever node is primary
      }
      std::this_thread::sleep_for(250ms);
    }
  });
}

void OutboxLagSampler::Stop() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

std::vector<LagSample> OutboxLagSampler::samples() const {
  std::lock_guard lock(mutex_);
  return samples_;
}

void PrintFailovers(const std::vector<FailoverRecord>& failovers, const std::vector<Attempt>& attempts,
                    const std::vector<LagSample>& lag, std::ostream& out) {
  if (failovers.empty()) return;
  out << "failovers (s from the kill; answers from the kill until 10 s after the new primary wrote: 503s for the\n"
         "database, and of those the ones sent after the new primary accepted writes; other 503s, timeouts, drops)\n"
      << "  node  writable  first 201  503s  503s sent after writable  other failures  worst outbox lag\n";
  std::vector<double> writable, first_201;
  std::int64_t total_503 = 0, total_late_503 = 0;
  for (const auto& f : failovers) {
    const auto until = (f.became_writable ? f.writable : f.killed + 120s) + 10s;
    std::optional<double> first;
    std::int64_t n503 = 0, late503 = 0, other = 0;
    for (const auto& a : attempts) {
      if (a.answer == "201" && a.sent >= f.killed) {
        const auto s = Seconds(a.answered - f.killed);
        if (!first || s < *first) first = s;
      }
      if (a.answered < f.killed || a.answered > until) continue;
      if (a.answer.rfind("503 unavailable", 0) == 0) {
        ++n503;
        if (f.became_writable && a.sent >= f.writable) ++late503;
      } else if (a.answer != "201" && a.answer != "202" && a.answer != "402" && a.answer != "409") {
        ++other;
      }
    }
    std::optional<double> w;
    if (f.became_writable) {
      w = Seconds(f.writable - f.killed);
      writable.push_back(Seconds(f.writable - f.killed));
    }
    if (first) first_201.push_back(*first);
    total_503 += n503;
    total_late_503 += late503;
    out << "  " << std::left << std::setw(6) << f.node << std::right << std::setw(8) << Figure(w) << std::setw(11)
        << Figure(first) << std::setw(6) << n503 << std::setw(26) << late503 << std::setw(16) << other
        << std::setw(18) << Figure(WorstLag(lag, f.killed, until)) << "\n";
  }
  out << "  median: writable " << Figure(Median(writable)) << " s, first 201 " << Figure(Median(first_201))
      << " s; database 503s: " << total_503 << " in " << failovers.size() << " failovers, " << total_late_503
      << " of them sent after the new primary accepted writes\n";
}

void PrintBrokerLosses(const std::vector<BrokerLossRecord>& losses, const std::vector<LagSample>& lag,
                       std::int64_t redeliveries, std::ostream& out) {
  if (losses.empty()) return;
  std::vector<double> all;
  for (const auto& s : lag) all.push_back(s.oldest_unpublished_s);
  out << "broker losses (outbox lag: the age of the oldest unpublished event, from the kill until 20 s after"
         " the broker was back; the run's median lag "
      << Figure(Median(all)) << " s)\n  node  down  worst outbox lag\n";
  std::vector<double> worst;
  for (const auto& l : losses) {
    const auto w = WorstLag(lag, l.killed, l.back + 20s);
    if (w) worst.push_back(*w);
    out << "  " << std::left << std::setw(6) << l.node << std::right << std::setw(4)
        << Figure(Seconds(l.back - l.killed)) << std::setw(18) << Figure(w) << "\n";
  }
  out << "  median worst lag " << Figure(Median(worst)) << " s; messages re-delivered in the whole run: "
      << redeliveries << " (" << Figure(static_cast<double>(redeliveries) / static_cast<double>(losses.size()))
      << " per broker loss, if nothing else re-delivered)\n";
}

}  // namespace charge_outbox::chaos
