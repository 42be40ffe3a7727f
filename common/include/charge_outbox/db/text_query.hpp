// Text queries: parameterized SQL whose parameters and results travel as text, for code outside
// common/ that owns a few tables of its own (a consumer's projection) and must not see libpqxx. Every
// value is a parameter; arrays travel as PostgreSQL array literals (TextArray) cast in the SQL.
#pragma once

#include <boost/asio/awaitable.hpp>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "charge_outbox/db/database.hpp"

namespace charge_outbox::db {

using TextValue = std::optional<std::string>;  // nullopt is SQL NULL
using TextParams = std::vector<TextValue>;
using TextRow = std::vector<TextValue>;
using TextRows = std::vector<TextRow>;

// The array literal of `values` ({"a","b"}), each element quoted and escaped: pass it as a parameter and
// cast it in the SQL ($1::text[], $2::bigint[]).
std::string TextArray(const std::vector<std::string>& values);

// The same literal built element by element, with no vector of copies in between (a batch's columns).
class TextArrayBuilder {
 public:
  TextArrayBuilder() : out_("{") {}
  void Add(std::string_view value);
  void Add(long long value);
  std::string Finish() &&;

 private:
  std::string out_;
};

// The literal of one field of every item: TextArrayOf(events, [](const E& e) { return e.id; }).
template <typename Items, typename Field>
std::string TextArrayOf(const Items& items, Field field) {
  TextArrayBuilder array;
  for (const auto& item : items) array.Add(field(item));
  return std::move(array).Finish();
}

// One transaction's statements, for code that is handed a transaction (an inbox handler). Throws
// DbException when a statement fails; the owner of the transaction then rolls it back.
class TextTransaction {
 public:
  virtual ~TextTransaction() = default;
  virtual TextRows Query(std::string_view sql, const TextParams& params) = 0;
};

class DbException : public std::runtime_error {
 public:
  explicit DbException(DbError error) : std::runtime_error(error.detail), error_(std::move(error)) {}
  const DbError& error() const noexcept { return error_; }

 private:
  DbError error_;
};

// One statement on the pool, in a transaction of its own (read-only), awaited without blocking the
// caller's I/O thread.
boost::asio::awaitable<DbResult<TextRows>> QueryText(Database& database, std::string sql, TextParams params);

}  // namespace charge_outbox::db
