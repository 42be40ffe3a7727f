// Turns whatever a database job threw into the DbError vocabulary, at the store boundary.
#pragma once

#include <exception>

#include "charge_outbox/db/database.hpp"

namespace charge_outbox::db {

// Call from a catch (...) block.
DbError CurrentDbError();

}  // namespace charge_outbox::db
