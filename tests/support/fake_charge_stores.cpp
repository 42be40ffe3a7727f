#include "fake_charge_stores.hpp"

#include <algorithm>
#include <cstdio>

#include "charge_outbox/util/sha256.hpp"
#include "charge_outbox/util/time.hpp"

namespace charge_outbox::testing {

namespace asio = boost::asio;
using charges::ChargeStatus;
using db::DbResult;

namespace {

std::string FakeUuid(int n) {
  char text[40];
  std::snprintf(text, sizeof text, "00000000-0000-4000-8000-%012x", static_cast<unsigned>(n));
  return text;
}

db::DbError NoSuchCharge(const std::string& id) { return db::DbError{db::DbErrc::kFailed, "no charge " + id}; }

}  // namespace

std::string FakeChargeTable::InsertPending(const std::string& key, std::chrono::milliseconds age,
                                           bool with_first_attempt) {
  Row row;
  auto& c = row.charge;
  c.id = FakeUuid(next_id_++);
  c.merchant_id = "00000000-0000-4000-8000-00000000000a";
  c.idempotency_key = key;
  c.fingerprint = util::Sha256(key);
  c.order_id = "PED-" + key;
  c.amount = 25000;
  c.currency = "BRL";
  c.payment_method = "pm_tok_visa";
  c.created_at = now_() - age;
  c.updated_at = c.created_at;
  c.last_sequence = 1;
  if (with_first_attempt) {
    c.attempt_count = 1;
    row.attempts.push_back(FakeAttempt{1, "req-" + c.id, acquirer::Operation::kCapture, "charge-api", c.created_at,
                                       std::nullopt, std::nullopt, std::nullopt});
  }
  events_.push_back(FakeEvent{c.id, "payments.charge.initiated.v1", 1});
  const auto id = c.id;
  rows_.emplace(id, std::move(row));
  return id;
}

std::optional<std::string> FakeChargeTable::IdByKey(const std::string& merchant_id, const std::string& key) const {
  for (const auto& [id, row] : rows_) {
    if (row.charge.merchant_id == merchant_id && row.charge.idempotency_key == key) return id;
  }
  return std::nullopt;
}

std::vector<std::string> FakeChargeTable::EventTypes(const std::string& charge_id) const {
  std::vector<std::string> types;
  for (const auto& e : events_) {
    if (e.charge_id == charge_id) types.push_back(e.type);
  }
  return types;
}

int FakeChargeTable::Calls(const std::string& operation) const {
  const auto it = calls_.find(operation);
  return it == calls_.end() ? 0 : it->second;
}

std::optional<db::DbError> FakeChargeTable::Enter(const std::string& operation) {
  ++calls_[operation];
  if (auto it = before_.find(operation); it != before_.end() && !it->second.empty()) {
    auto action = std::move(it->second.front());
    it->second.erase(it->second.begin());
    action();
  }
  if (auto it = failures_.find(operation); it != failures_.end() && !it->second.empty()) {
    const auto code = it->second.front();
    it->second.erase(it->second.begin());
    return db::DbError{code, "injected failure of " + operation};
  }
  return std::nullopt;
}

bool FakeChargeTable::VoidOnRecord(const Row& row) const {
  return std::any_of(row.attempts.begin(), row.attempts.end(),
                     [](const FakeAttempt& a) { return a.operation == acquirer::Operation::kVoid; });
}

FakeChargeTable::Row& FakeChargeTable::Refresh(Row& row) {
  auto& c = row.charge;
  c.age = std::chrono::floor<std::chrono::milliseconds>(now_() - c.created_at);
  c.lease_remaining = std::chrono::milliseconds{0};
  if (LeaseLive(row)) {
    c.lease_remaining = std::chrono::ceil<std::chrono::milliseconds>(*row.lease_expires_at - now_());
  }
  return row;
}

void FakeChargeTable::AddEvent(Row& row) {
  row.charge.last_sequence += 1;
  events_.push_back(FakeEvent{row.charge.id, "payments.charge." + std::string(charges::ToString(row.charge.status)) +
                                                 ".v1",
                              row.charge.last_sequence});
}

// ---- FakeAuthenticator ----------------------------------------------------------------------------

asio::awaitable<DbResult<std::optional<charges::Merchant>>> FakeAuthenticator::Authenticate(const std::string& api_key) {
  if (auto e = t_.Enter("Authenticate")) co_return *e;
  const auto it = t_.merchants_by_key_hash_.find(util::Sha256Hex(api_key));
  if (it == t_.merchants_by_key_hash_.end()) co_return std::optional<charges::Merchant>{};
  co_return std::optional(charges::Merchant{it->second});
}

// ---- FakeChargeStore -------------------------------------------------------------------------------

asio::awaitable<DbResult<charges::BeginResult>> FakeChargeStore::Begin(const charges::NewCharge& n,
                                                                       const charges::Lease& lease,
                                                                       const charges::FirstAttempt& first) {
  if (auto e = t_.Enter("Begin")) co_return *e;
  const auto lease_until = t_.now() + lease.duration;
  if (const auto existing = t_.IdByKey(n.merchant_id, n.idempotency_key)) {
    auto& row = t_.Refresh(t_.rows_.at(*existing));
    auto& c = row.charge;
    if (c.fingerprint != n.fingerprint) co_return charges::BeginResult{charges::BeginOutcome::kFingerprintMismatch, c};
    if (charges::IsTerminal(c.status)) co_return charges::BeginResult{charges::BeginOutcome::kFinished, c};
    if (c.owner_id == lease.owner_id) {
      co_return charges::BeginResult{charges::BeginOutcome::kCreated, c, 1, row.attempts.at(0).request_id};
    }
    if (t_.LeaseLive(row)) co_return charges::BeginResult{charges::BeginOutcome::kInFlight, c};
    c.owner_id = lease.owner_id;
    row.lease_expires_at = lease_until;
    co_return charges::BeginResult{charges::BeginOutcome::kTakenOver, t_.Refresh(row).charge};
  }
  FakeChargeTable::Row row;
  auto& c = row.charge;
  c.id = FakeUuid(t_.next_id_++);
  c.merchant_id = n.merchant_id;
  c.idempotency_key = n.idempotency_key;
  c.fingerprint = n.fingerprint;
  c.order_id = n.terms.order_id;
  c.amount = n.terms.amount;
  c.currency = n.terms.currency;
  c.payment_method = n.terms.payment_method;
  c.description = n.terms.description;
  c.owner_id = lease.owner_id;
  c.traceparent = n.traceparent;
  c.created_at = t_.now();
  c.updated_at = c.created_at;
  c.last_sequence = 1;
  c.attempt_count = 1;
  row.lease_expires_at = lease_until;
  const std::string request_id = first.request_id;
  row.attempts.push_back(
      FakeAttempt{1, request_id, first.operation, first.actor, t_.now(), std::nullopt, std::nullopt, std::nullopt});
  t_.events_.push_back(FakeEvent{c.id, "payments.charge.initiated.v1", 1});
  const auto id = c.id;
  auto& inserted = t_.rows_.emplace(id, std::move(row)).first->second;
  if (t_.TakeLostAnswer("Begin")) co_return db::DbError{db::DbErrc::kInDoubt, "connection lost after the commit"};
  co_return charges::BeginResult{charges::BeginOutcome::kCreated, t_.Refresh(inserted).charge, 1, request_id};
}

asio::awaitable<DbResult<charges::StartedAttempt>> FakeChargeStore::StartAttempt(const std::string& charge_id,
                                                                                const charges::AttemptStart& a) {
  if (auto e = t_.Enter("StartAttempt")) co_return *e;
  auto& row = t_.rows_.at(charge_id);
  const bool moves_money = a.operation == acquirer::Operation::kCapture || a.operation == acquirer::Operation::kVoid;
  if (moves_money && !a.lease) co_return db::DbError{db::DbErrc::kFailed, "a capture or void attempt needs its owner"};
  if (a.lease && (row.charge.status != ChargeStatus::kPending || row.charge.owner_id != a.lease->owner_id ||
                  !t_.LeaseLive(row))) {
    co_return charges::StartedAttempt{0, charges::Refusal::kNotOwner};
  }
  if (a.operation == acquirer::Operation::kCapture) {
    if (t_.VoidOnRecord(row)) co_return charges::StartedAttempt{0, charges::Refusal::kVoidOnRecord};
    if (t_.now() - row.charge.created_at >= a.deadline) co_return charges::StartedAttempt{0, charges::Refusal::kPastDeadline};
  }
  if (a.lease) row.lease_expires_at = t_.now() + a.lease->duration;
  const int no = ++row.charge.attempt_count;
  row.attempts.push_back(FakeAttempt{no, a.request_id, a.operation, a.actor, t_.now(), std::nullopt, std::nullopt,
                                     std::nullopt});
  co_return charges::StartedAttempt{no, std::nullopt};
}

void FakeChargeStore::Finish(FakeChargeTable::Row& row, const charges::AttemptFinish& finish) {
  for (auto& a : row.attempts) {
    if (a.attempt_no != finish.attempt_no) continue;
    a.finished_at = a.started_at + finish.elapsed;
    a.outcome = finish.outcome;
    a.evidence = finish.evidence;
  }
}

asio::awaitable<DbResult<void>> FakeChargeStore::FinishAttempt(const std::string& charge_id,
                                                               const charges::AttemptFinish& a) {
  if (auto e = t_.Enter("FinishAttempt")) co_return *e;
  Finish(t_.rows_.at(charge_id), a);
  co_return DbResult<void>{};
}

asio::awaitable<DbResult<charges::CompleteResult>> FakeChargeStore::Complete(
    const std::string& charge_id, const charges::Transition& t, const std::optional<charges::AttemptFinish>& attempt) {
  if (auto e = t_.Enter("Complete")) co_return *e;
  const auto it = t_.rows_.find(charge_id);
  if (it == t_.rows_.end()) co_return NoSuchCharge(charge_id);
  auto& row = it->second;
  auto& c = row.charge;
  if (t.basis == charges::Basis::kInference && t.owner_id.empty()) {
    co_return db::DbError{db::DbErrc::kFailed, "an inferred transition needs its owner"};
  }
  const bool capture = t.to == ChargeStatus::kCaptured;
  if (capture && t.deadline.count() <= 0) co_return db::DbError{db::DbErrc::kFailed, "a capture needs the charge's deadline"};
  if (attempt) Finish(row, *attempt);
  if (c.status != ChargeStatus::kPending) co_return charges::CompleteResult{false, t_.Refresh(row).charge, std::nullopt};
  if (t.basis == charges::Basis::kInference && c.owner_id != t.owner_id) {
    co_return charges::CompleteResult{false, t_.Refresh(row).charge, charges::Refusal::kNotOwner};
  }
  if (capture && t_.VoidOnRecord(row)) {
    co_return charges::CompleteResult{false, t_.Refresh(row).charge, charges::Refusal::kVoidOnRecord};
  }
  if (capture && t_.now() - c.created_at >= t.deadline) {
    co_return charges::CompleteResult{false, t_.Refresh(row).charge, charges::Refusal::kPastDeadline};
  }
  c.status = t.to;
  if (t.acquirer_capture_id) c.acquirer_capture_id = t.acquirer_capture_id;
  c.decline_code = t.decline_code;
  c.failure_reason = t.failure_reason;
  c.updated_at = t_.now();
  c.response_status = t.response_status;
  c.response_body = t.response_body;
  if (c.response_body) {
    // As the SQL does: the statement's own time in place of the mark.
    const auto at = c.response_body->find(charges::kDatabaseTimeMark);
    if (at != std::string::npos) {
      c.response_body->replace(at, charges::kDatabaseTimeMark.size(),
                               R"("updated_at":")" + charges::FormatTimestamp(c.updated_at) + R"(")");
    }
  }
  c.owner_id.reset();
  row.lease_expires_at.reset();
  row.next_check_at.reset();
  t_.AddEvent(row);
  co_return charges::CompleteResult{true, t_.Refresh(row).charge, std::nullopt};
}

asio::awaitable<DbResult<std::optional<charges::Charge>>> FakeChargeStore::FlagForReview(
    const std::string& charge_id, ChargeStatus expected, const std::string& reason, const std::string&) {
  if (auto e = t_.Enter("FlagForReview")) co_return *e;
  auto& row = t_.rows_.at(charge_id);
  auto& c = row.charge;
  if (c.status != expected || expected == ChargeStatus::kPending || expected == ChargeStatus::kNeedsReview) {
    co_return std::optional<charges::Charge>{};
  }
  c.status = ChargeStatus::kNeedsReview;
  c.failure_reason = reason;
  c.updated_at = t_.now();
  c.response_status.reset();
  c.response_body.reset();
  c.owner_id.reset();
  row.lease_expires_at.reset();
  row.next_check_at.reset();
  t_.AddEvent(row);
  co_return std::optional(t_.Refresh(row).charge);
}

asio::awaitable<DbResult<bool>> FakeChargeStore::RenewLease(const std::string& charge_id, const std::string& owner_id,
                                                            std::chrono::milliseconds lease) {
  if (auto e = t_.Enter("RenewLease")) co_return *e;
  auto& row = t_.rows_.at(charge_id);
  if (row.charge.owner_id != owner_id || row.charge.status != ChargeStatus::kPending) co_return false;
  row.lease_expires_at = t_.now() + lease;
  co_return true;
}

asio::awaitable<DbResult<charges::AttemptHistory>> FakeChargeStore::ReadAttemptHistory(const std::string& charge_id) {
  if (auto e = t_.Enter("ReadAttemptHistory")) co_return *e;
  const auto& attempts = t_.rows_.at(charge_id).attempts;
  charges::AttemptHistory history;
  std::optional<charges::Timestamp> last_sent;
  for (const auto& a : attempts) {
    if (a.operation == acquirer::Operation::kVoid) history.void_attempted = true;
    if (a.operation == acquirer::Operation::kVoid && a.outcome == acquirer::OutcomeKind::kStoredError) {
      ++history.void_stored_errors;
    }
    if (a.operation != acquirer::Operation::kCapture || a.evidence == acquirer::EvidenceClass::kNotSent) continue;
    history.capture_may_have_left = true;
    if (a.finished_at) history.capture_answered = true;
    last_sent = std::max(last_sent.value_or(a.started_at), a.started_at);
  }
  for (const auto& a : attempts) {
    if (a.operation != acquirer::Operation::kLookup || a.outcome != acquirer::OutcomeKind::kNotFound) continue;
    if (last_sent && a.started_at <= *last_sent) continue;
    ++history.not_found_looks;
    history.first_not_found_at = std::min(history.first_not_found_at.value_or(a.started_at), a.started_at);
  }
  if (history.first_not_found_at) {
    history.first_not_found_age = std::chrono::floor<std::chrono::milliseconds>(t_.now() - *history.first_not_found_at);
  }
  co_return history;
}

asio::awaitable<DbResult<void>> FakeChargeStore::Release(const std::string& charge_id, const std::string& owner_id,
                                                         const std::optional<charges::AttemptFinish>& attempt) {
  if (auto e = t_.Enter("Release")) co_return *e;
  auto& row = t_.rows_.at(charge_id);
  if (row.charge.owner_id == owner_id && row.charge.status == ChargeStatus::kPending) {
    row.charge.owner_id.reset();
    row.lease_expires_at.reset();
  }
  if (attempt) Finish(row, *attempt);
  co_return DbResult<void>{};
}

asio::awaitable<DbResult<void>> FakeChargeStore::AbandonIntent(const std::string& owner_id,
                                                               const std::string& first_request_id) {
  if (auto e = t_.Enter("AbandonIntent")) co_return *e;
  for (auto& [id, row] : t_.rows_) {
    for (auto& a : row.attempts) {
      if (a.request_id != first_request_id || a.attempt_no != 1 || a.finished_at) continue;
      a.finished_at = a.started_at;
      a.outcome = acquirer::OutcomeKind::kNotSent;
      a.evidence = acquirer::EvidenceClass::kNotSent;
      if (row.charge.owner_id == owner_id && row.charge.status == ChargeStatus::kPending) {
        row.charge.owner_id.reset();
        row.lease_expires_at.reset();
      }
    }
  }
  co_return DbResult<void>{};
}

asio::awaitable<DbResult<std::optional<charges::Charge>>> FakeChargeStore::FindById(const std::string& merchant_id,
                                                                                    const std::string& charge_id) {
  if (auto e = t_.Enter("FindById")) co_return *e;
  const auto it = t_.rows_.find(charge_id);
  if (it == t_.rows_.end() || it->second.charge.merchant_id != merchant_id) co_return std::optional<charges::Charge>{};
  co_return std::optional(t_.Refresh(it->second).charge);
}

asio::awaitable<DbResult<std::optional<charges::Charge>>> FakeChargeStore::FindByKey(const std::string& merchant_id,
                                                                                     const std::string& key) {
  if (auto e = t_.Enter("FindByKey")) co_return *e;
  const auto id = t_.IdByKey(merchant_id, key);
  if (!id) co_return std::optional<charges::Charge>{};
  co_return std::optional(t_.Refresh(t_.rows_.at(*id)).charge);
}

asio::awaitable<DbResult<std::int64_t>> FakeChargeStore::CountPendingOlderThan(std::chrono::milliseconds older_than) {
  if (auto e = t_.Enter("CountPendingOlderThan")) co_return *e;
  std::int64_t n = 0;
  for (const auto& [id, row] : t_.rows_) {
    if (row.charge.status == ChargeStatus::kPending && row.charge.created_at < t_.now() - older_than) ++n;
  }
  co_return n;
}

// ---- FakeReconciliationStore -----------------------------------------------------------------------

asio::awaitable<DbResult<charges::ClaimBatch>> FakeReconciliationStore::ClaimDue(const charges::ClaimRequest& r) {
  if (auto e = t_.Enter("ClaimDue")) co_return *e;
  const auto after = r.after ? std::optional(std::stoll(r.after->created_at)) : std::nullopt;
  std::vector<FakeChargeTable::Row*> due;
  for (auto& [id, row] : t_.rows_) {
    const auto& c = row.charge;
    const auto created = util::ToUnixMicros(c.created_at);
    if (c.status != ChargeStatus::kPending || c.created_at >= t_.now() - r.grace) continue;
    if (row.next_check_at && *row.next_check_at > t_.now()) continue;
    if (t_.LeaseLive(row)) continue;
    if (after && created < *after) continue;
    due.push_back(&row);
  }
  std::sort(due.begin(), due.end(), [](auto* a, auto* b) { return a->charge.created_at < b->charge.created_at; });
  if (due.size() > static_cast<std::size_t>(r.limit)) due.resize(static_cast<std::size_t>(r.limit));
  charges::ClaimBatch batch;
  for (auto* row : due) {
    row->charge.owner_id = r.owner_id;
    row->lease_expires_at = t_.now() + r.lease;
    batch.charges.push_back(charges::ClaimedCharge{t_.Refresh(*row).charge, row->check_count});
    batch.next = charges::SweepCursor{std::to_string(util::ToUnixMicros(row->charge.created_at))};
  }
  co_return batch;
}

asio::awaitable<DbResult<bool>> FakeReconciliationStore::Reschedule(
    const std::string& charge_id, const std::string& owner_id, std::chrono::milliseconds delay,
    const std::optional<charges::AttemptFinish>& attempt) {
  if (auto e = t_.Enter("Reschedule")) co_return *e;
  auto& row = t_.rows_.at(charge_id);
  if (attempt) {
    for (auto& a : row.attempts) {
      if (a.attempt_no != attempt->attempt_no) continue;
      a.finished_at = a.started_at + attempt->elapsed;
      a.outcome = attempt->outcome;
      a.evidence = attempt->evidence;
    }
  }
  if (row.charge.owner_id != owner_id || row.charge.status != ChargeStatus::kPending) co_return false;
  row.next_check_at = t_.now() + delay;
  ++row.check_count;
  row.charge.owner_id.reset();
  row.lease_expires_at.reset();
  co_return true;
}

asio::awaitable<DbResult<int>> FakeReconciliationStore::ReleaseAll(const std::string& owner_id,
                                                                   std::chrono::milliseconds /*claims_grace*/) {
  if (auto e = t_.Enter("ReleaseAll")) co_return *e;
  int n = 0;
  for (auto& [id, row] : t_.rows_) {
    if (row.charge.owner_id != owner_id || row.charge.status != ChargeStatus::kPending) continue;
    row.charge.owner_id.reset();
    row.lease_expires_at.reset();
    ++n;
  }
  co_return n;
}

asio::awaitable<DbResult<std::vector<std::string>>> FakeReconciliationStore::FindCapturedIdsInWindow(
    charges::Timestamp from, charges::Timestamp to, charges::Timestamp created_after,
    std::chrono::milliseconds visibility) {
  if (auto e = t_.Enter("FindCapturedIdsInWindow")) co_return *e;
  std::vector<std::pair<charges::Timestamp, std::string>> found;
  for (auto& [id, row] : t_.rows_) {
    const auto& c = t_.Refresh(row).charge;
    if (c.status == ChargeStatus::kCaptured && c.created_at >= created_after && c.created_at < to &&
        c.updated_at >= from && c.updated_at < t_.now() - visibility) {
      found.emplace_back(c.created_at, c.id);
    }
  }
  std::sort(found.begin(), found.end());
  std::vector<std::string> out;
  for (auto& [created, id] : found) out.push_back(std::move(id));
  co_return out;
}

asio::awaitable<DbResult<std::vector<charges::Charge>>> FakeReconciliationStore::FindByIds(
    const std::vector<std::string>& ids) {
  if (auto e = t_.Enter("FindByIds")) co_return *e;
  std::vector<charges::Charge> out;
  for (const auto& id : ids) {
    if (const auto it = t_.rows_.find(id); it != t_.rows_.end()) out.push_back(t_.Refresh(it->second).charge);
  }
  co_return out;
}

}  // namespace charge_outbox::testing
