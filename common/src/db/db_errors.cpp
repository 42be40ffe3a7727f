#include "db/db_errors.hpp"

#include <pqxx/pqxx>

#include "charge_outbox/db/text_query.hpp"
#include "db/pg_pool.hpp"

namespace charge_outbox::db {
namespace {

// The server's message without its DETAIL lines, which can quote row values.
std::string FirstLine(const char* what) {
  std::string line(what);
  if (const auto nl = line.find('\n'); nl != std::string::npos) line.resize(nl);
  return line;
}

}  // namespace

DbError CurrentDbError() {
  try {
    throw;
  } catch (const pqxx::in_doubt_error& e) {
    return {DbErrc::kInDoubt, FirstLine(e.what())};
  } catch (const pqxx::broken_connection& e) {
    return {DbErrc::kUnavailable, FirstLine(e.what())};
  } catch (const PoolOverloaded& e) {
    return {DbErrc::kOverloaded, e.what()};
  } catch (const pqxx::sql_error& e) {
    // Server-side cancellations and shutdowns are about availability, not about the statement.
    const auto state = e.sqlstate();
    if (state.rfind("57", 0) == 0 || state.rfind("08", 0) == 0 || state == "53300") {
      return {DbErrc::kUnavailable, FirstLine(e.what())};
    }
    // A deadlock or serialization failure rolled the whole transaction back: nothing was written, and
    // the same transaction sent again normally succeeds.
    if (state == "40P01" || state == "40001") return {DbErrc::kUnavailable, state + ": " + FirstLine(e.what())};
    return {DbErrc::kFailed, state + ": " + FirstLine(e.what())};
  } catch (const DbException& e) {
    return e.error();
  } catch (const std::exception& e) {
    return {DbErrc::kFailed, FirstLine(e.what())};
  }
}

}  // namespace charge_outbox::db
