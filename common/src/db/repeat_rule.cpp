#include "db/repeat_rule.hpp"

#include <pqxx/pqxx>

namespace charge_outbox::db {

JobFailure ClassifyJobFailure(const std::exception_ptr& failure, bool sent, bool expired, bool read_only_server) {
  try {
    std::rethrow_exception(failure);
  } catch (const pqxx::in_doubt_error&) {
    return JobFailure::kCommitInDoubt;
  } catch (const pqxx::broken_connection&) {
    if (expired) return JobFailure::kPastDeadline;
    return sent ? JobFailure::kLostAfterSending : JobFailure::kLostBeforeSending;
  } catch (const pqxx::sql_error& e) {
    // 25006 is also what a write inside our own READ ONLY transaction gets: only a server that says it is
    // read-only as a whole makes it a matter of the connection.
    if (e.sqlstate() == "25006" && read_only_server) return JobFailure::kReadOnlyServer;
    return JobFailure::kRefused;
  } catch (...) {
    return JobFailure::kRefused;
  }
}

bool MayRunAgain(JobFailure failure, Repeat repeat) {
  switch (failure) {
    // Nothing of the job reached the server.
    case JobFailure::kLostBeforeSending: return true;
    // A read-only server refuses every write: whatever the job did there changed nothing.
    case JobFailure::kReadOnlyServer: return true;
    // It may have run: only a job that does the same thing when run twice runs again.
    case JobFailure::kLostAfterSending: return repeat == Repeat::kIdempotent;
    // The caller turns an unknown commit into its honest answer; a second run would hide it.
    case JobFailure::kCommitInDoubt: return false;
    case JobFailure::kPastDeadline: return false;
    case JobFailure::kRefused: return false;
  }
  return false;
}

std::string_view ToString(JobFailure failure) {
  switch (failure) {
    case JobFailure::kLostBeforeSending: return "lost before sending";
    case JobFailure::kLostAfterSending: return "lost with a statement sent";
    case JobFailure::kCommitInDoubt: return "commit in doubt";
    case JobFailure::kReadOnlyServer: return "the server is read-only (a standby)";
    case JobFailure::kPastDeadline: return "past database.call_timeout";
    case JobFailure::kRefused: return "refused";
  }
  return "unknown";
}

}  // namespace charge_outbox::db
