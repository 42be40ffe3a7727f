#include "charge_outbox/charges/attempt_recorder.hpp"

#include <spdlog/spdlog.h>

#include "charge_outbox/db/retry.hpp"
#include "charge_outbox/log/log.hpp"

namespace charge_outbox::charges {

namespace asio = boost::asio;

AttemptRecorder::AttemptRecorder(ChargeStore& store, std::string charge_id, acquirer::Operation operation,
                                 std::string actor, std::string trace_id, std::optional<Ownership> ownership,
                                 std::optional<int> first_attempt_on_record, bool in_review)
    : store_(store),
      charge_id_(std::move(charge_id)),
      operation_(operation),
      actor_(std::move(actor)),
      trace_id_(std::move(trace_id)),
      ownership_(std::move(ownership)),
      first_attempt_on_record_(first_attempt_on_record),
      in_review_(in_review) {}

asio::awaitable<void> AttemptRecorder::OnAttemptStarted(const acquirer::AttemptContext& attempt,
                                                        std::chrono::system_clock::time_point /*started_at*/) {
  co_await FlushFinish();
  if (attempt.attempt_no == 1 && first_attempt_on_record_) {
    current_ = *first_attempt_on_record_;
    co_return;
  }
  // Named, not a braced temporary in the co_await expression: GCC 12 destroys such temporaries twice.
  AttemptStart start{attempt.request_id, operation_, actor_, std::nullopt, {}, in_review_};
  if (ownership_) {
    start.lease = ownership_->lease;
    start.deadline = ownership_->deadline;
  }
  const auto start_call = [&] { return store_.StartAttempt(charge_id_, start); };
  const auto r = co_await db::WithDbRetries(start_call);
  current_ = r ? r->attempt_no : 0;
  if (!r) {
    log::WithTrace(trace_id_, spdlog::level::warn, "attempt of charge {} not recorded, so not sent: {}", charge_id_,
                   r.error().detail);
  } else if (r->refused) {
    refusal_ = r->refused;
    log::WithTrace(trace_id_, spdlog::level::info, "{} of charge {} not recorded, so not sent: {}",
                   acquirer::ToString(operation_), charge_id_, ToString(*r->refused));
  }
}

asio::awaitable<void> AttemptRecorder::OnAttemptFinished(const acquirer::AttemptRecord& record) {
  if (current_ > 0) {
    pending_ = AttemptFinish{current_, record.elapsed, record.outcome.kind, record.outcome.evidence(),
                             record.outcome.http_status};
  }
  co_return;
}

asio::awaitable<bool> AttemptRecorder::FlushFinish() {
  if (!pending_) co_return true;
  const auto finish = *std::exchange(pending_, std::nullopt);
  const auto finish_call = [&] { return store_.FinishAttempt(charge_id_, finish); };
  const auto r = co_await db::WithDbRetries(finish_call);
  if (!r) {
    log::WithTrace(trace_id_, spdlog::level::warn, "attempt {} of charge {} not finished on record: {}",
                   finish.attempt_no, charge_id_, r.error().detail);
  }
  co_return r.has_value();
}

acquirer::AttemptOutcome AttemptRecorder::NotRecorded() const {
  acquirer::AttemptOutcome outcome;
  outcome.operation = operation_;
  outcome.kind = acquirer::OutcomeKind::kNotSent;
  outcome.transport = acquirer::TransportStatus::kConnectFailed;
  outcome.detail = refusal_ ? "not sent: refused on record (" + std::string(ToString(*refusal_)) + ")"
                            : "not sent: the attempt could not be recorded";
  return outcome;
}

}  // namespace charge_outbox::charges
