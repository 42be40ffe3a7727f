#include "attempt_log.hpp"

#include <spdlog/spdlog.h>

namespace charge_outbox::reconciler {

namespace asio = boost::asio;

bool RetryableDbError(const db::DbError& error) {
  switch (error.code) {
    case db::DbErrc::kUnavailable:
    case db::DbErrc::kOverloaded:
    case db::DbErrc::kInDoubt: return true;
    case db::DbErrc::kFailed: return false;
  }
  return false;
}

AttemptLog::AttemptLog(charges::ChargeStore& store, std::string charge_id, acquirer::Operation operation)
    : store_(store), charge_id_(std::move(charge_id)), operation_(operation) {}

asio::awaitable<void> AttemptLog::OnAttemptStarted(const acquirer::AttemptContext& attempt,
                                                   std::chrono::system_clock::time_point started_at) {
  co_await FlushFinish();
  const charges::AttemptStart start{attempt.request_id, operation_, kActor, started_at};
  const auto start_call = [&] { return store_.StartAttempt(charge_id_, start); };
  const auto r = co_await WithDbRetries(start_call);
  current_ = r ? *r : 0;
  if (!r) spdlog::warn("attempt of charge {} not recorded, so not sent: {}", charge_id_, r.error().detail);
}

asio::awaitable<void> AttemptLog::OnAttemptFinished(const acquirer::AttemptRecord& record) {
  if (current_ > 0) {
    pending_ = charges::AttemptFinish{current_, record.finished_at, record.outcome.kind, record.outcome.evidence(),
                                      record.outcome.http_status};
  }
  co_return;
}

asio::awaitable<void> AttemptLog::FlushFinish() {
  if (!pending_) co_return;
  const auto finish = *std::exchange(pending_, std::nullopt);
  const auto finish_call = [&] { return store_.FinishAttempt(charge_id_, finish); };
  const auto r = co_await WithDbRetries(finish_call);
  if (!r) {
    spdlog::warn("attempt {} of charge {} not finished on record: {}", finish.attempt_no, charge_id_,
                 r.error().detail);
  }
}

acquirer::AttemptOutcome AttemptLog::NotRecorded() const {
  acquirer::AttemptOutcome outcome;
  outcome.operation = operation_;
  outcome.kind = acquirer::OutcomeKind::kNotSent;
  outcome.transport = acquirer::TransportStatus::kConnectFailed;
  outcome.detail = "not sent: the attempt could not be recorded";
  return outcome;
}

}  // namespace charge_outbox::reconciler
