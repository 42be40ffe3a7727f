// Prints the pgbench script of the charge flow's two statements, taken verbatim from the charge store
// (PgChargeStoreStatements), so the baseline runs exactly the SQL charge-api runs: the intent statement,
// then the result statement on the charge it created. Parameters become pgbench variables (set with -D,
// or :k, a random number per transaction); the NULL parameters of a capture (decline_code, failure_reason,
// the owner an inference needs) are written as NULL, since pgbench cannot bind a NULL, and attempt 1's
// request id, which charge-api draws per request, as gen_random_uuid().
#include <iostream>
#include <map>
#include <regex>
#include <string>

#include "charge_outbox/charges/charge_store.hpp"

namespace {

std::string Substitute(const std::string& sql, const std::map<int, std::string>& params) {
  static const std::regex kParam(R"(\$([0-9]+))");
  std::string out;
  auto begin = std::sregex_iterator(sql.begin(), sql.end(), kParam);
  std::size_t last = 0;
  for (auto it = begin; it != std::sregex_iterator(); ++it) {
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
  for (const auto& s : charge_outbox::charges::PgChargeStoreStatements()) sql[s.name] = s.sql;

  // charge_begin: merchant, key, fingerprint, order, amount, currency, payment method, description, owner,
  // lease ms, traceparent, attempt 1's request id, operation, actor.
  const std::map<int, std::string> begin_params = {
      {1, ":merchant"}, {2, ":k"},        {3, ":fingerprint"}, {4, ":k"},         {5, ":amount"},
      {6, ":currency"}, {7, ":pm"},       {8, ":description"}, {9, ":k"},         {10, ":lease_ms"},
      {11, ":traceparent"}, {12, "gen_random_uuid()"}, {13, ":operation"}, {14, ":actor"}};
  // charge_complete: charge id, status, capture id, decline code, failure reason, response status, response
  // body, traceparent, attempt no, its elapsed ms, outcome, evidence, http status, owner (NULL: a transition
  // the acquirer's answer proves, as a capture is), a capture's deadline ms, the body's time mark.
  const std::map<int, std::string> complete_params = {
      {1, ":b_id"},     {2, ":to"},          {3, ":k"},           {4, "NULL"},         {5, "NULL"},
      {6, ":status"},   {7, ":body"},        {8, ":traceparent"}, {9, ":one"},         {10, ":elapsed_ms"},
      {11, ":outcome"}, {12, ":evidence"},   {13, ":status"},     {14, "NULL"},        {15, ":deadline_ms"},
      {16, ":mark"}};

  std::cout << "\\set k random(1, 9000000000000000000)\n";
  // The intent returns the charge; its columns become b_* variables (b_id is the charge the result updates).
  std::cout << Substitute(sql.at("charge_begin"), begin_params) << " \\gset b_\n";
  std::cout << Substitute(sql.at("charge_complete"), complete_params) << ";\n";
  return 0;
}
