// When a pool job that failed may run again on a fresh connection: the one rule, apart from the pool so
// that a unit test can hold it (tests/common/db/repeat_rule_test.cpp). Internal to common/.
//
// A job runs again at most once, and only where running it again cannot do a second time what the first
// run did: nothing of it reached the server, or the server refused every write of it, or its caller marked
// it idempotent. A COMMIT whose outcome is unknown is never run again here: the caller has the one honest
// answer (in doubt), and finds out by reading.
#pragma once

#include <exception>
#include <string_view>

namespace charge_outbox::db {

// Whether the caller allows a job to run twice.
enum class Repeat {
  kIfNotSent,   // every job: again only when it provably did nothing on the server
  kIdempotent,  // read-only, or marked by its caller: again also when its connection died under it
};

// What became of a failed job, as far as the client can know.
enum class JobFailure {
  kLostBeforeSending,  // the connection was lost before any statement of the job was handed to libpq
  kLostAfterSending,   // the connection was lost with a statement sent: it may have run, even committed
  kCommitInDoubt,      // the job itself says a commit's outcome is unknown (pqxx::in_doubt_error)
  kReadOnlyServer,     // the server refused a write as read-only (25006) and says it is a standby
  kPastDeadline,       // database.call_timeout cut the call: its time is spent
  kRefused,            // anything else: the server refused a statement, or the job failed by itself
};

// What `failure` (a job's exception) means. `sent`: a statement of the job was handed to libpq;
// `expired`: the call's deadline cut its connection; `read_only_server`: the connection's server reports
// itself read-only (in_hot_standby or default_transaction_read_only).
JobFailure ClassifyJobFailure(const std::exception_ptr& failure, bool sent, bool expired, bool read_only_server);

// Whether the job may run once more on a fresh connection.
bool MayRunAgain(JobFailure failure, Repeat repeat);

std::string_view ToString(JobFailure failure);

}  // namespace charge_outbox::db
