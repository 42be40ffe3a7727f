#include "charges/pg/charge_sql.hpp"

#include <algorithm>

#include "charge_outbox/util/time.hpp"

namespace charge_outbox::charges::sql {
namespace {

std::optional<std::string> OptionalText(const db::PgField& f) { return f.optional<std::string>(); }

Fingerprint FromHex(const std::string& hex) {
  Fingerprint out{};
  for (std::size_t i = 0; i < out.size() && 2 * i + 1 < hex.size(); ++i) {
    out[i] = static_cast<std::uint8_t>(std::stoi(hex.substr(2 * i, 2), nullptr, 16));
  }
  return out;
}

}  // namespace

OperatorAction ReadAction(const db::PgRow& row) {
  OperatorAction a;
  a.at = row[0].as<std::string>();
  a.operator_name = row[1].as<std::string>();
  a.action = row[2].as<std::string>();
  a.subject = row[3].as<std::string>();
  a.reason = row[4].as<std::string>();
  a.before = row[5].optional<std::string>();
  a.after = row[6].optional<std::string>();
  a.acquirer_said = row[7].optional<std::string>();
  a.against_acquirer = row[8].as<int>() != 0;
  return a;
}

Charge ReadCharge(const db::PgRow& row, int first) {
  auto f = [&](int i) { return row[first + i]; };
  Charge c;
  c.id = f(0).as<std::string>();
  c.merchant_id = f(1).as<std::string>();
  c.idempotency_key = f(2).as<std::string>();
  c.fingerprint = FromHex(f(3).as<std::string>());
  c.order_id = f(4).as<std::string>();
  c.amount = f(5).as<std::int64_t>();
  c.currency = f(6).as<std::string>();
  c.payment_method = f(7).as<std::string>();
  c.description = OptionalText(f(8));
  c.status = ParseChargeStatus(f(9).as<std::string>()).value_or(ChargeStatus::kNeedsReview);
  c.acquirer_capture_id = OptionalText(f(10));
  c.decline_code = OptionalText(f(11));
  c.failure_reason = OptionalText(f(12));
  c.owner_id = OptionalText(f(13));
  c.lease_remaining = std::chrono::milliseconds{f(14).as<std::int64_t>()};
  if (!f(15).is_null()) c.response_status = f(15).as<int>();
  c.response_body = OptionalText(f(16));
  c.last_sequence = f(17).as<int>();
  c.attempt_count = f(18).as<int>();
  c.traceparent = f(19).as<std::string>();
  c.created_at = util::FromUnixMicros(f(20).as<std::int64_t>());
  c.updated_at = util::FromUnixMicros(f(21).as<std::int64_t>());
  c.age = std::chrono::milliseconds{f(22).as<std::int64_t>()};
  return c;
}

FinishParams ToParams(const std::optional<AttemptFinish>& a) {
  if (!a) return {};
  return {std::to_string(a->attempt_no), std::to_string(std::max<std::int64_t>(0, a->elapsed.count())),
          std::string(acquirer::ToString(a->outcome)), std::string(acquirer::ToString(a->evidence)),
          a->http_status ? std::optional(std::to_string(*a->http_status)) : std::nullopt};
}

}  // namespace charge_outbox::charges::sql
