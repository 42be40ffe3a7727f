// Prints the pgbench script of the reconciler's claim, taken verbatim from the reconciliation store
// (PgReconciliationStoreStatements), so the baseline runs exactly the SQL a sweep runs. Parameters become
// pgbench variables (set with -D): grace_ms, limit, owner, lease_ms, and the cursor, which starts at a
// random charge each time (the seeded charges are created base_us + 1..n microseconds apart, so position
// :k is a timestamp) to spread the claims over the table as a sweep walks it.
#include <iostream>
#include <map>
#include <regex>
#include <string>

#include "charge_outbox/charges/reconciliation_store.hpp"

namespace {

std::string Substitute(const std::string& sql, const std::map<int, std::string>& params) {
  static const std::regex kParam(R"(\$([0-9]+))");
  std::string out;
  std::size_t last = 0;
  for (auto it = std::sregex_iterator(sql.begin(), sql.end(), kParam); it != std::sregex_iterator(); ++it) {
    const auto& m = *it;
    out += sql.substr(last, static_cast<std::size_t>(m.position()) - last);
    out += params.at(std::stoi(m[1].str()));
    last = static_cast<std::size_t>(m.position() + m.length());
  }
  return out + sql.substr(last);
}

}  // namespace

int main() {
  std::map<std::string, std::string> sql;
  for (const auto& s : charge_outbox::charges::PgReconciliationStoreStatements()) sql[s.name] = s.sql;
  // reconciler_claim_due: grace (ms), cursor created_at, limit, owner, lease (ms).
  const std::map<int, std::string> claim_params = {
      {1, ":grace_ms"},
      {2, "(to_timestamp(:base_us / 1000000.0) + :k * interval '1 microsecond')::text"},
      {3, ":limit"},
      {4, "'reconciler/pgbench'"},
      {5, ":lease_ms"}};
  std::cout << "\\set k random(0, :n)\n";
  std::cout << Substitute(sql.at("reconciler_claim_due"), claim_params) << ";\n";
  return 0;
}
