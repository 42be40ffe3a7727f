// In-memory ChargeStore and ReconciliationStore over one shared table of charges, attempts and events,
// for fast unit tests of ChargeService and PendingSweep. They keep the rules the SQL keeps (the unique
// key, leases, the conditional transition and its owner guard, the review flag, the attempt history), so
// a decision tested here is the decision the real stores would let through. The integration tests
// (*_pgtest.cpp) hold the SQL itself to the same rules.
//
// A test can make the next call of an operation fail (FailNext) and run "another actor" just before an
// operation (Before), which is how a race is staged without threads. Not thread-safe: one test, one
// coroutine at a time.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "charge_outbox/charges/charge_store.hpp"
#include "charge_outbox/charges/reconciliation_store.hpp"
#include "charge_outbox/merchants/merchant_store.hpp"

namespace charge_outbox::testing {

struct FakeAttempt {
  int attempt_no = 0;
  std::string request_id;
  acquirer::Operation operation = acquirer::Operation::kCapture;
  std::string actor;
  charges::Timestamp started_at{};
  std::optional<charges::Timestamp> finished_at;
  std::optional<acquirer::OutcomeKind> outcome;
  std::optional<acquirer::EvidenceClass> evidence;
};

struct FakeEvent {
  std::string charge_id;
  std::string type;  // payments.charge.<status>.v1
  int sequence = 0;
};

// The rows both fakes read and write. `now` is the database's clock.
class FakeChargeTable {
 public:
  explicit FakeChargeTable(std::function<charges::Timestamp()> now) : now_(std::move(now)) {}

  struct Row {
    charges::Charge charge;
    std::optional<charges::Timestamp> lease_expires_at;
    std::optional<charges::Timestamp> next_check_at;
    int check_count = 0;
    std::vector<FakeAttempt> attempts;
  };

  // A pending charge as charge-api leaves it after its intent (attempt 1 a capture, started, unfinished,
  // unless `with_first_attempt` is false), created `age` ago, no live lease. Returns its id.
  std::string InsertPending(const std::string& key, std::chrono::milliseconds age, bool with_first_attempt = true);

  Row& row(const std::string& id) { return rows_.at(id); }
  const charges::Charge& charge(const std::string& id) { return Refresh(rows_.at(id)).charge; }
  std::optional<std::string> IdByKey(const std::string& merchant_id, const std::string& key) const;
  const std::vector<FakeEvent>& events() const { return events_; }
  std::vector<std::string> EventTypes(const std::string& charge_id) const;
  charges::Timestamp now() const { return now_(); }

  // The next call of `operation` ("Begin", "StartAttempt", "Complete", "RenewLease", "ReadAttemptHistory",
  // "FlagForReview", "Release", "AbandonIntent", "FinishAttempt", "ClaimDue", "Reschedule") fails with `code`.
  void FailNext(const std::string& operation, db::DbErrc code) { failures_[operation].push_back(code); }
  // Runs `action` once, just before the next call of `operation` does its work.
  void Before(const std::string& operation, std::function<void()> action) { before_[operation].push_back(std::move(action)); }
  // The same, just before the n-th call from now (1: the next).
  void BeforeCall(const std::string& operation, int n, std::function<void()> action) {
    if (n <= 1) return Before(operation, std::move(action));
    Before(operation, [this, operation, n, action = std::move(action)] { BeforeCall(operation, n - 1, action); });
  }
  // The next call of `operation` ("Begin") does its work, commits, and then reports kInDoubt, as when the
  // connection dies after the commit and before its answer.
  void LoseAnswerNext(const std::string& operation) { ++lost_answers_[operation]; }
  bool TakeLostAnswer(const std::string& operation) {
    auto& lost = lost_answers_[operation];
    if (lost <= 0) return false;
    --lost;
    return true;
  }
  // How many times `operation` was called.
  int Calls(const std::string& operation) const;

  // What the SQL does, shared by both fakes.
  std::optional<db::DbError> Enter(const std::string& operation);
  Row& Refresh(Row& row);
  void AddEvent(Row& row);
  bool LeaseLive(const Row& row) const { return row.lease_expires_at && *row.lease_expires_at > now_(); }
  bool VoidOnRecord(const Row& row) const;

  std::map<std::string, Row> rows_;
  std::vector<FakeEvent> events_;
  std::map<std::string, std::string> merchants_by_key_hash_;

 private:
  std::function<charges::Timestamp()> now_;
  std::map<std::string, std::vector<db::DbErrc>> failures_;
  std::map<std::string, std::vector<std::function<void()>>> before_;
  std::map<std::string, int> calls_;
  std::map<std::string, int> lost_answers_;
  int next_id_ = 1;
  friend class FakeChargeStore;
  friend class FakeAuthenticator;
};

// charge-api's key lookups, against the table's merchants_by_key_hash_ (call name "Authenticate").
class FakeAuthenticator final : public merchants::Authenticator {
 public:
  explicit FakeAuthenticator(FakeChargeTable& table) : t_(table) {}

  boost::asio::awaitable<db::DbResult<std::optional<charges::Merchant>>> Authenticate(const std::string& api_key) override;

 private:
  FakeChargeTable& t_;
};

class FakeChargeStore final : public charges::ChargeStore {
 public:
  explicit FakeChargeStore(FakeChargeTable& table) : t_(table) {}

  boost::asio::awaitable<db::DbResult<charges::BeginResult>> Begin(const charges::NewCharge& charge,
                                                                   const charges::Lease& lease,
                                                                   const charges::FirstAttempt& first_attempt) override;
  boost::asio::awaitable<db::DbResult<charges::StartedAttempt>> StartAttempt(
      const std::string& charge_id, const charges::AttemptStart& attempt) override;
  boost::asio::awaitable<db::DbResult<void>> FinishAttempt(const std::string& charge_id,
                                                           const charges::AttemptFinish& attempt) override;
  boost::asio::awaitable<db::DbResult<charges::CompleteResult>> Complete(
      const std::string& charge_id, const charges::Transition& transition,
      const std::optional<charges::AttemptFinish>& attempt) override;
  boost::asio::awaitable<db::DbResult<std::optional<charges::Charge>>> FlagForReview(
      const std::string& charge_id, charges::ChargeStatus expected, const std::string& reason,
      const std::string& traceparent) override;
  boost::asio::awaitable<db::DbResult<bool>> RenewLease(const std::string& charge_id, const std::string& owner_id,
                                                        std::chrono::milliseconds lease) override;
  boost::asio::awaitable<db::DbResult<charges::AttemptHistory>> ReadAttemptHistory(const std::string& charge_id) override;
  boost::asio::awaitable<db::DbResult<void>> Release(const std::string& charge_id, const std::string& owner_id,
                                                     const std::optional<charges::AttemptFinish>& attempt) override;
  boost::asio::awaitable<db::DbResult<void>> AbandonIntent(const std::string& owner_id,
                                                           const std::string& first_request_id) override;
  boost::asio::awaitable<db::DbResult<std::optional<charges::Charge>>> FindById(const std::string& merchant_id,
                                                                                const std::string& charge_id) override;
  boost::asio::awaitable<db::DbResult<std::optional<charges::Charge>>> FindByKey(
      const std::string& merchant_id, const std::string& idempotency_key) override;
  boost::asio::awaitable<db::DbResult<std::int64_t>> CountPendingOlderThan(std::chrono::milliseconds older_than) override;

 private:
  void Finish(FakeChargeTable::Row& row, const charges::AttemptFinish& finish);
  FakeChargeTable& t_;
};

class FakeReconciliationStore final : public charges::ReconciliationStore {
 public:
  explicit FakeReconciliationStore(FakeChargeTable& table) : t_(table) {}

  boost::asio::awaitable<db::DbResult<charges::ClaimBatch>> ClaimDue(const charges::ClaimRequest& request) override;
  boost::asio::awaitable<db::DbResult<bool>> Reschedule(const std::string& charge_id, const std::string& owner_id,
                                                        std::chrono::milliseconds delay,
                                                        const std::optional<charges::AttemptFinish>& attempt) override;
  boost::asio::awaitable<db::DbResult<int>> ReleaseAll(const std::string& owner_id,
                                                       std::chrono::milliseconds claims_grace) override;
  boost::asio::awaitable<db::DbResult<std::vector<std::string>>> FindCapturedIdsInWindow(
      charges::Timestamp from, charges::Timestamp to, charges::Timestamp created_after,
      std::chrono::milliseconds visibility) override;
  boost::asio::awaitable<db::DbResult<std::vector<charges::Charge>>> FindByIds(
      const std::vector<std::string>& ids) override;

 private:
  FakeChargeTable& t_;
};

}  // namespace charge_outbox::testing
