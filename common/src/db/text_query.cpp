#include "charge_outbox/db/text_query.hpp"

#include "db/db_errors.hpp"
#include "db/pg_pool.hpp"
#include "db/text_rows.hpp"

namespace charge_outbox::db {

std::string TextArray(const std::vector<std::string>& values) {
  std::string out = "{";
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (i > 0) out += ',';
    out += '"';
    for (const char c : values[i]) {
      if (c == '"' || c == '\\') out += '\\';
      out += c;
    }
    out += '"';
  }
  out += '}';
  return out;
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
    co_return co_await database.pool().Run([&](pqxx::connection& conn) {
      pqxx::read_transaction tx(conn);
      auto rows = ExecText(tx, sql, params);
      tx.commit();
      return rows;
    });
  } catch (...) {
    co_return CurrentDbError();
  }
}

}  // namespace charge_outbox::db
