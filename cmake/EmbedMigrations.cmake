# Build-time script: writes a C++ source holding every sql/migrations/*.sql file, so each binary
# carries exactly the schema it was built for (the Helm hook Job needs no files beside the binary).
# Usage: cmake -DMIGRATIONS_DIR=... -DOUTPUT=... -P EmbedMigrations.cmake
file(GLOB files RELATIVE ${MIGRATIONS_DIR} ${MIGRATIONS_DIR}/*.sql)
list(SORT files)
set(body "")
foreach(f IN LISTS files)
  file(READ ${MIGRATIONS_DIR}/${f} sql)
  string(FIND "${sql}" ")co_sql\"" clash)
  if(NOT clash EQUAL -1)
    message(FATAL_ERROR "${f} contains the raw-string delimiter )co_sql\"")
  endif()
  string(APPEND body "    MakeMigration(\"${f}\", R\"co_sql(${sql})co_sql\"),\n")
endforeach()
set(content "// Generated from sql/migrations by cmake/EmbedMigrations.cmake; do not edit.
#include \"charge_outbox/db/migrations.hpp\"

namespace charge_outbox::db {

const std::vector<Migration>& EmbeddedMigrations() {
  static const std::vector<Migration> kMigrations = SortedMigrationSet({
${body}  });
  return kMigrations;
}

}  // namespace charge_outbox::db
")
# Only touch the output when it changes, so an unrelated rebuild does not recompile it.
if(EXISTS ${OUTPUT})
  file(READ ${OUTPUT} old)
  if(old STREQUAL content)
    return()
  endif()
endif()
file(WRITE ${OUTPUT} "${content}")
