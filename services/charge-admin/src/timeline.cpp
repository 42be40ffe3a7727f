#include "timeline.hpp"

#include <algorithm>
#include <cstdio>

namespace charge_outbox::charge_admin {
namespace {

std::string Or(const std::optional<std::string>& v, std::string fallback) { return v ? *v : std::move(fallback); }

std::string AttemptLine(const charges::AttemptRow& a) {
  std::string line = a.operation + " attempt " + std::to_string(a.attempt_no) + ": ";
  if (!a.finished_at) return line + "unfinished (its process died, or its finish was never written)";
  line += Or(a.outcome, "?") + ", evidence " + Or(a.evidence, "?");
  if (a.http_status) line += ", HTTP " + std::to_string(*a.http_status);
  return line + ", finished " + *a.finished_at;
}

std::string EventLine(const charges::EventRow& e) {
  std::string line = "event " + std::to_string(e.sequence) + " " + e.type + ": ";
  if (e.published_at) return line + "published " + *e.published_at;
  if (e.skipped_at) return line + "skipped by an operator " + *e.skipped_at + " (never published)";
  if (e.parked_at) return line + "PARKED since " + *e.parked_at + " (outbox-relay parked list)";
  return line + "not yet published";
}

std::string ActionLine(const charges::OperatorAction& a) {
  std::string line = a.action + ": " + Or(a.before, "?") + " -> " + Or(a.after, "?");
  if (a.against_acquirer) line += " AGAINST THE ACQUIRER";
  line += "; why: " + a.reason;
  if (a.acquirer_said) line += "; the acquirer said: " + *a.acquirer_said;
  return line;
}

}  // namespace

std::vector<TimelineEntry> Timeline(const charges::Charge& c, const charges::ChargeHistory& h) {
  std::vector<TimelineEntry> out;
  out.push_back({charges::FormatTimestamp(c.created_at), "client",
                 "request: idempotency key " + c.idempotency_key + ", order " + c.order_id + ", " +
                     std::to_string(c.amount) + " " + c.currency});
  for (const auto& a : h.attempts) out.push_back({a.started_at, a.actor, AttemptLine(a)});
  for (const auto& e : h.events) out.push_back({e.created_at, Or(e.producer, "?"), EventLine(e)});
  for (const auto& a : h.actions) out.push_back({a.at, a.operator_name, ActionLine(a)});
  // RFC 3339 UTC with the same precision sorts as text; what happened at one instant keeps the order
  // above (request, calls, events, decisions).
  std::stable_sort(out.begin(), out.end(), [](const auto& x, const auto& y) { return x.at < y.at; });
  return out;
}

boost::json::object ChargeJson(const charges::Charge& c) {
  boost::json::object o{{"id", c.public_id()},
                        {"merchant_id", c.merchant_id},
                        {"idempotency_key", c.idempotency_key},
                        {"order_id", c.order_id},
                        {"amount", c.amount},
                        {"currency", c.currency},
                        {"status", charges::ToString(c.status)},
                        {"sequence", c.last_sequence},
                        {"created_at", charges::FormatTimestamp(c.created_at)},
                        {"updated_at", charges::FormatTimestamp(c.updated_at)}};
  if (c.description) o["description"] = *c.description;
  if (c.acquirer_capture_id) o["acquirer_capture_id"] = *c.acquirer_capture_id;
  if (c.decline_code) o["decline_code"] = *c.decline_code;
  if (c.failure_reason) o["failure_reason"] = *c.failure_reason;
  return o;
}

std::string ChargeRowHeader() {
  char line[256];
  std::snprintf(line, sizeof line, "%-35s  %-13s  %-38s  %14s %-3s  %s", "charge", "status", "reason", "amount",
                "", "order");
  return line;
}

std::string ChargeRow(const charges::Charge& c) {
  char line[512];
  std::snprintf(line, sizeof line, "%-35s  %-13s  %-38s  %14lld %-3s  %s", c.public_id().c_str(),
                std::string(charges::ToString(c.status)).c_str(), Or(c.failure_reason, "-").c_str(),
                static_cast<long long>(c.amount), c.currency.c_str(), c.order_id.substr(0, 60).c_str());
  return line;
}

std::string FormatDuration(std::chrono::milliseconds d) {
  using namespace std::chrono;
  const auto s = duration_cast<seconds>(d).count();
  if (s < 60) return std::to_string(s) + "s";
  if (s < 3600) return std::to_string(s / 60) + "m " + std::to_string(s % 60) + "s";
  if (s < 86400) return std::to_string(s / 3600) + "h " + std::to_string(s % 3600 / 60) + "m";
  return std::to_string(s / 86400) + "d " + std::to_string(s % 86400 / 3600) + "h";
}

}  // namespace charge_outbox::charge_admin
