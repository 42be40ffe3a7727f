#include "charge_outbox/db/text_query.hpp"

#include "db/db_errors.hpp"
#include "db/pg_pool.hpp"
#include "db/text_rows.hpp"

namespace charge_outbox::db {

void TextArrayBuilder::Add(std::string_view value) {
  if (out_.size() > 1) out_ += ',';
  out_ += '"';
  for (const char c : value) {
    if (c == '"' || c == '\\') out_ += '\\';
    out_ += c;
  }
  out_ += '"';
}

void TextArrayBuilder::Add(long long value) {
  if (out_.size() > 1) out_ += ',';
  out_ += std::to_string(value);
}

std::string TextArrayBuilder::Finish() && {
  out_ += '}';
  return std::move(out_);
}

std::string TextArray(const std::vector<std::string>& values) {
  return TextArrayOf(values, [](const std::string& v) { return std::string_view(v); });
}

TextRows ExecText(pqxx::transaction_base& tx, std::string_view sql, const TextParams& params) {
  const auto result = tx.exec_params(std::string(sql), pqxx::prepare::make_dynamic_params(params));
  TextRows rows;
  rows.reserve(result.size());
  for (const auto& row : result) {
    TextRow out;
    out.reserve(row.size());
    for (const auto& field : row) {
      out.push_back(field.is_null() ? TextValue{} : TextValue{std::string(field.c_str(), field.size())});
    }
    rows.push_back(std::move(out));
  }
  return rows;
}

boost::asio::awaitable<DbResult<TextRows>> QueryText(Database& database, std::string sql, TextParams params) {
  try {
    // A READ ONLY transaction: the server refuses any write in it, so running it again changes nothing.
    co_return co_await database.pool().Run([&](PgConnection& conn) -> boost::asio::awaitable<TextRows> {
      PgParams values;
      for (const auto& param : params) values.Add(param);
      co_await conn.ExecuteText("BEGIN READ ONLY");
      std::exception_ptr failure;
      PgResult result;
      try {
        result = co_await conn.ExecuteText(sql, values);
      } catch (...) {
        failure = std::current_exception();
      }
      co_await conn.ExecuteText(failure ? "ROLLBACK" : "COMMIT");
      if (failure) std::rethrow_exception(failure);
      TextRows rows;
      rows.reserve(result.size());
      for (const auto row : result) {
        TextRow out;
        out.reserve(static_cast<std::size_t>(row.size()));
        for (int i = 0; i < row.size(); ++i) {
          out.push_back(row[i].is_null() ? TextValue{} : TextValue{std::string(row[i].view())});
        }
        rows.push_back(std::move(out));
      }
      co_return rows;
    }, Repeat::kIdempotent);
  } catch (...) {
    co_return CurrentDbError();
  }
}

}  // namespace charge_outbox::db
