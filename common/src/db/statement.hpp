// A prepared statement of ours: its name, as pg_prepared_statements and the code that executes it call
// it, defined next to its SQL. Internal to common/ (the stores' SQL never leaves their adapters).
#pragma once

namespace charge_outbox::db {

struct Statement {
  const char* name;
  const char* sql;
};

}  // namespace charge_outbox::db
