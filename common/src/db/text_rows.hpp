// The libpqxx side of text queries (text_query.hpp): one statement on a transaction the caller owns.
#pragma once

#include <pqxx/pqxx>

#include <string_view>

#include "charge_outbox/db/text_query.hpp"

namespace charge_outbox::db {

TextRows ExecText(pqxx::transaction_base& tx, std::string_view sql, const TextParams& params);

}  // namespace charge_outbox::db
