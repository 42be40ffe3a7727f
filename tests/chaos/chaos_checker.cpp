#include "chaos_checker.hpp"

#include <pqxx/pqxx>

#include <boost/json/parse.hpp>

#include <set>
#include <thread>

#include "event_contract.hpp"
#include "http_test_client.hpp"
#include "kafka_test_topic.hpp"

namespace charge_outbox::chaos {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

struct LedgerCapture {
  std::string id, idempotency_key, reference, currency, merchant;
  std::int64_t amount = 0;
  bool voided = false;
  std::string voided_at;  // the void's created_at, RFC 3339 cut to milliseconds
};

struct LocalCharge {
  std::string uuid, public_id, merchant_id, key, status, currency, capture_id, failure_reason;
  std::int64_t amount = 0;
  std::string order_id;
};

struct Event {
  std::string id, charge, type;
  int sequence = 0;
  std::string time;  // created_at (ce_time), RFC 3339 with milliseconds
};

std::string Str(const boost::json::object& o, std::string_view key) {
  const auto* v = o.if_contains(key);
  return v != nullptr && v->is_string() ? std::string(v->as_string()) : std::string();
}

std::vector<LedgerCapture> ReadLedger(std::uint16_t acquirer_port) {
  testing::HttpTestClient client(acquirer_port, "127.0.0.1", 60s);
  const auto r = client.Get("/admin/ledger");
  if (!r.ok() || r.status() != 200u) {
    throw std::runtime_error("the acquirer's ledger could not be read: " +
                             (r.ok() ? "status " + std::to_string(r.status()) : r.error.message()));
  }
  std::vector<LedgerCapture> captures;
  std::map<std::string, std::size_t> by_id;
  const auto ledger = r.json();  // named: a range-for over a member of a temporary would dangle
  for (const auto& e : ledger.at("entries").as_array()) {
    const auto& o = e.as_object();
    const auto type = Str(o, "type");
    if (type == "capture") {
      LedgerCapture c{Str(o, "id"), Str(o, "idempotency_key"), Str(o, "reference"), Str(o, "currency"),
                      Str(o, "merchant"), o.at("amount").to_number<std::int64_t>(), false};
      by_id[c.id] = captures.size();
      captures.push_back(std::move(c));
    } else if (type == "void") {
      if (const auto it = by_id.find(Str(o, "id")); it != by_id.end()) {
        captures[it->second].voided = true;
        // As the outbox writes times (milliseconds), so that the two compare as text.
        const auto at = Str(o, "created_at");
        captures[it->second].voided_at = at.size() > 24 ? at.substr(0, 23) + "Z" : at;
      }
    }
  }
  return captures;
}

std::int64_t Scalar(pqxx::connection& conn, const std::string& sql) {
  pqxx::nontransaction tx(conn);
  return tx.exec1(sql)[0].as<std::int64_t>();
}

}  // namespace

bool Settle(ChaosStack& stack, std::chrono::seconds settle_for, std::ostream& log) {
  const auto deadline = Clock::now() + settle_for;
  std::int64_t pending = -1, backlog = -1;
  auto next_report = Clock::now() + 10s;
  while (Clock::now() < deadline) {
    try {
      pqxx::connection conn(stack.database_url());
      pending = Scalar(conn, "SELECT count(*) FROM charges WHERE status = 'pending'");
      backlog = Scalar(conn, "SELECT count(*) FROM outbox WHERE published_at IS NULL");
    } catch (const std::exception& e) {
      log << "  settling: " << e.what() << "\n";
      std::this_thread::sleep_for(500ms);
      continue;
    }
    if (pending == 0 && backlog == 0) return true;
    if (pending > 0) stack.RunReconcilerOnce();
    if (Clock::now() >= next_report) {
      log << "  settling: " << pending << " pending, " << backlog << " events unpublished" << std::endl;
      next_report = Clock::now() + 10s;
    }
    std::this_thread::sleep_for(500ms);
  }
  log << "  not settled after " << settle_for.count() << " s: " << pending << " pending, " << backlog
      << " events unpublished\n";
  return false;
}

Verdict Check(ChaosStack& stack, const std::vector<IntentOutcome>& outcomes, const CheckOptions& options,
              std::ostream& log) {
  Verdict verdict;
  const auto ledger = ReadLedger(stack.acquirer_port());
  std::map<std::string, LocalCharge> charges;          // by public id
  std::map<std::string, std::string> public_by_key;    // merchant + key -> public id
  std::vector<Event> events;
  std::set<std::string> orphans_recorded;              // capture ids the window report kept
  {
    pqxx::connection conn(stack.database_url());
    pqxx::nontransaction tx(conn);
    for (const auto& row : tx.exec(
             "SELECT id::text, charge_public_id(id), merchant_id::text, idempotency_key, status::text, amount, currency,"
             " COALESCE(acquirer_capture_id, ''), COALESCE(failure_reason, ''), order_id FROM charges")) {
      LocalCharge c{row[0].as<std::string>(), row[1].as<std::string>(), row[2].as<std::string>(),
                    row[3].as<std::string>(), row[4].as<std::string>(), row[6].as<std::string>(),
                    row[7].as<std::string>(), row[8].as<std::string>(), row[5].as<std::int64_t>(),
                    row[9].as<std::string>()};
      public_by_key[c.merchant_id + "/" + c.key] = c.public_id;
      ++verdict.charges_by_status[c.status];
      charges.emplace(c.public_id, std::move(c));
    }
    for (const auto& row : tx.exec("SELECT id::text, aggregateid, type, sequence, rfc3339(created_at) FROM outbox"
                                   " ORDER BY position")) {
      events.push_back(Event{row[0].as<std::string>(), row[1].as<std::string>(), row[2].as<std::string>(),
                             row[3].as<int>(), row[4].as<std::string>()});
    }
    for (const auto& row : tx.exec("SELECT capture_id FROM orphan_captures")) orphans_recorded.insert(row[0].as<std::string>());
  }

  // What Kafka carries (invariants 7 and 8, and what the database forgot), read until every event of the
  // outbox has arrived: events a failover forgot may be there too, and do not count.
  std::set<std::string> outbox_ids;
  for (const auto& e : events) outbox_ids.insert(e.id);
  std::set<std::string> arrived;
  const auto messages = testing::ConsumeTopicUntil(
      stack.kafka_bootstrap(), stack.topic(),
      [&](const testing::ConsumedMessage& m) {
        const auto it = m.headers.find("ce_id");
        if (it != m.headers.end() && outbox_ids.count(it->second) > 0) arrived.insert(it->second);
        return arrived.size() >= outbox_ids.size();
      },
      120s);

  // What the database forgot: captures whose charge it does not have, the charges a retry of the same key
  // created again (the acquirer replayed the forgotten charge's capture to it), and events on the topic
  // the outbox no longer has (a result forgotten after it was published: its charge may end otherwise).
  std::set<std::string> forgotten_events, charges_with_forgotten_events;
  for (const auto& m : messages) {
    const auto it = m.headers.find("ce_id");
    if (it != m.headers.end() && outbox_ids.count(it->second) == 0 && charges.count(m.key) > 0) {
      forgotten_events.insert(it->second);
      charges_with_forgotten_events.insert(m.key);
    }
  }
  std::set<std::string> forgotten_references, forgotten_keys;
  for (const auto& c : ledger) {
    if (charges.count(c.reference) == 0) {
      forgotten_references.insert(c.reference);
      forgotten_keys.insert(c.idempotency_key);
    }
  }
  std::set<std::string> touched = forgotten_references;  // public ids a forgotten commit explains
  touched.insert(charges_with_forgotten_events.begin(), charges_with_forgotten_events.end());
  std::int64_t recreated = 0;
  for (const auto& [id, local] : charges) {
    if (forgotten_keys.count(local.merchant_id + ":" + local.key) > 0) {
      touched.insert(id);
      ++recreated;
    }
  }
  // Under asynchronous replication: a violation on a charge a forgotten commit touched, or on one a client
  // was told about that no longer exists, is counted apart.
  const auto forgiven = [&](Invariant& invariant, const std::string& id, std::string example) {
    if (options.forgetting_allowed && !id.empty() && (touched.count(id) > 0 || charges.count(id) == 0)) {
      ++invariant.forgotten;
    } else {
      invariant.Violation(std::move(example));
    }
  };

  // 1. One capture per acquirer key.
  Invariant once{"1. no acquirer idempotency key captured twice"};
  std::map<std::string, int> captures_per_key;
  for (const auto& c : ledger) ++captures_per_key[c.merchant + "/" + c.idempotency_key];
  for (const auto& [key, n] : captures_per_key) {
    ++once.checked;
    if (n > 1) once.Violation(key + " captured " + std::to_string(n) + " times");
  }

  // 2. Every capture is one of ours, and ours says so.
  Invariant owned{"2. every ledger capture is a local charge captured (or in review, or canceled by its void)"};
  std::map<std::string, const LedgerCapture*> live_by_reference;
  for (const auto& c : ledger) {
    ++owned.checked;
    if (!c.voided) live_by_reference[c.reference] = &c;
    const auto it = charges.find(c.reference);
    if (it == charges.end()) {
      forgiven(owned, c.reference, c.id + " (" + c.reference + "): no local charge");
      continue;
    }
    const auto& local = it->second;
    const bool fine = (local.status == "captured" && !c.voided) ||
                      (local.status == "needs_review" && !local.failure_reason.empty()) ||
                      (local.status == "canceled" && c.voided);
    if (!fine) {
      forgiven(owned, local.public_id, c.id + (c.voided ? " (voided)" : "") + " but " + local.public_id + " is " + local.status +
                      (local.failure_reason.empty() ? "" : " (" + local.failure_reason + ")"));
    }
  }

  // 3. Every local capture is at the acquirer, as recorded.
  Invariant backed{"3. no local captured without a live ledger capture of its id, amount and currency"};
  // 4. Nothing left pending.
  Invariant settled{"4. no charge left pending"};
  for (const auto& [id, local] : charges) {
    ++settled.checked;
    if (local.status == "pending") settled.Violation(id + " pending");
    if (local.status != "captured") continue;
    ++backed.checked;
    const auto live = live_by_reference.find(id);
    if (live == live_by_reference.end()) {
      forgiven(backed, id, id + " captured, nothing live at the acquirer");
    } else if (live->second->id != local.capture_id || live->second->amount != local.amount ||
               live->second->currency != local.currency) {
      forgiven(backed, id, id + " captured as " + local.capture_id + " " + std::to_string(local.amount) + " " +
                       local.currency + ", the acquirer has " + live->second->id + " " +
                       std::to_string(live->second->amount) + " " + live->second->currency);
    }
  }

  // The key's charge of a client's intent, as the client learned it or as the database has it.
  const auto charge_of = [&](const IntentOutcome& outcome) {
    if (!outcome.charge_id.empty()) return outcome.charge_id;
    const auto it = public_by_key.find(outcome.intent.merchant_id + "/" + outcome.intent.key);
    return it != public_by_key.end() ? it->second : std::string();
  };

  // 5. What each client was told is the truth.
  Invariant truthful{"5. every answer a client was told is the truth by the acquirer's ledger"};
  for (const auto& outcome : outcomes) {
    if (!outcome.used) continue;
    const auto id = charge_of(outcome);
    for (std::size_t i = 0; i < outcome.told.size(); ++i) {
      const auto& told = outcome.told[i];
      if (told != "captured" && told != "failed" && told != "canceled") continue;
      ++truthful.checked;
      const bool money = live_by_reference.count(id) > 0;
      // An answer given while the database could acknowledge what it then forgot (asynchronous only).
      const bool in_window = i < outcome.told_at.size() && std::any_of(options.forgetting_windows.begin(),
                                                                        options.forgetting_windows.end(), [&](const auto& w) {
                                                                          return outcome.told_at[i] >= w.first &&
                                                                                 outcome.told_at[i] <= w.second;
                                                                        });
      const auto explained = [&](std::string example) {
        if (options.forgetting_allowed && in_window) {
          ++truthful.forgotten;
        } else {
          forgiven(truthful, id, std::move(example));
        }
      };
      if (told == "captured" && !money) explained(outcome.intent.key + " told captured, no capture " + id);
      if (told != "captured" && money) explained(outcome.intent.key + " told " + told + ", but " + id + " is captured");
    }
  }

  // 6. One terminal event per terminal charge.
  Invariant announced{"6. exactly one terminal outbox event per terminal charge"};
  std::map<std::string, std::vector<const Event*>> terminal_events;
  for (const auto& e : events) {
    if (e.type != "payments.charge.initiated.v1") terminal_events[e.charge].push_back(&e);
  }
  for (const auto& [id, local] : charges) {
    if (local.status == "pending") continue;
    ++announced.checked;
    const auto& list = terminal_events[id];
    const bool one = list.size() == 1;
    const bool flagged_later = list.size() == 2 && list[1]->type == "payments.charge.needs_review.v1";
    const bool last_matches = !list.empty() && list.back()->type == "payments.charge." + local.status + ".v1";
    if (!(one || flagged_later) || !last_matches) {
      std::string types;
      for (const auto* e : list) types += (types.empty() ? "" : ",") + e->type;
      announced.Violation(id + " " + local.status + ": [" + types + "]");
    }
  }

  // 7. Kafka carries every event, in order per charge.
  Invariant delivered{"7. every event read back from Kafka, in sequence order per charge"};
  // At least once: a re-delivery (after a relay died between publishing and marking) repeats events
  // already read, possibly a whole run of them. What must hold: the first delivery of each event comes in
  // `sequence` order for its charge, and a repeat is the same event (same ce_id, same sequence).
  std::set<std::string> seen;
  std::map<std::string, int> sequence_of;                   // ce_id -> its sequence
  std::map<std::string, std::map<int, std::string>> firsts;  // charge -> sequence -> ce_id (first deliveries)
  std::map<std::string, int> highest;                        // charge -> highest sequence first-delivered
  for (const auto& m : messages) {
    const auto ce_id = m.headers.count("ce_id") > 0 ? m.headers.at("ce_id") : std::string();
    boost::system::error_code ec;
    const auto value = boost::json::parse(m.value, ec);
    const int sequence = ec || !value.is_object() ? -1 : static_cast<int>(value.at("sequence").to_number<std::int64_t>());
    if (const auto again = sequence_of.find(ce_id); again != sequence_of.end()) {
      ++verdict.redeliveries;
      if (again->second != sequence) {
        forgiven(delivered, m.key, m.key + ": " + ce_id + " re-delivered with sequence " + std::to_string(sequence) +
                            ", first " + std::to_string(again->second));
      }
      continue;
    }
    sequence_of[ce_id] = sequence;
    seen.insert(ce_id);
    auto& charge_firsts = firsts[m.key];
    if (const auto taken = charge_firsts.find(sequence); taken != charge_firsts.end()) {
      forgiven(delivered, m.key, m.key + ": two events with sequence " + std::to_string(sequence) + " (" + taken->second +
                          ", " + ce_id + ")");
    }
    charge_firsts[sequence] = ce_id;
    auto& top = highest[m.key];
    if (sequence < top) {
      forgiven(delivered, m.key, m.key + ": sequence " + std::to_string(sequence) + " (" + ce_id + ") first delivered after " +
                          std::to_string(top));
    }
    top = std::max(top, sequence);
  }
  for (const auto& e : events) {
    ++delivered.checked;
    if (seen.count(e.id) == 0) delivered.Violation(e.charge + " " + e.type + " (" + e.id + ") never read back");
  }
  log << "  read back " << messages.size() << " messages for " << events.size() << " events\n";

  // 8. What was read back is what the contract publishes: each payload valid against the JSON Schema of its
  // ce_type (a real validator), ce_dataschema naming it, ce_time the payload's updated_at, ce_source the
  // daemon that wrote it.
  Invariant conforming{"8. every event read back conforms to its schema (schemas/events) and attributes"};
  conforming.checked = static_cast<std::int64_t>(messages.size());
  for (auto& v : testing::EventContractViolations(messages, PROJECT_ROOT,
                                                  {"/charge-outbox/charge-api", "/charge-outbox/reconciler"})) {
    conforming.Violation(std::move(v));
  }

  // 9. Clients that start over (only after a definitive "no money") are charged once per order.
  Invariant per_order{"9. no order captured twice, though clients start orders over after a definitive no"};
  std::map<std::string, std::vector<std::string>> live_per_order;  // merchant/order -> live capture ids
  for (const auto& c : ledger) {
    if (c.voided) continue;
    const auto it = charges.find(c.reference);
    if (it == charges.end()) continue;  // invariant 2's
    live_per_order[it->second.merchant_id + "/" + it->second.order_id].push_back(c.id + " (" + c.reference + ")");
  }
  for (const auto& [order, captures] : live_per_order) {
    ++per_order.checked;
    if (captures.size() > 1) {
      std::string list;
      for (const auto& c : captures) list += (list.empty() ? "" : ", ") + c;
      per_order.Violation(order + " captured " + std::to_string(captures.size()) + " times: " + list);
    }
  }

  // 10. Each answer's words are true, as invariant 5 holds the statuses.
  Invariant words{"10. every answer's words are true (no money taken, under review) by the ledger and the record"};
  for (const auto& outcome : outcomes) {
    if (!outcome.used) continue;
    const auto id = charge_of(outcome);
    for (const auto& claim : outcome.claims) {
      ++words.checked;
      if (claim == "no_money" && live_by_reference.count(id) > 0) {
        forgiven(words, id, outcome.intent.key + " was told no money was taken (or nothing was charged), but " + id +
                        " holds a live capture");
      } else if (claim == "under_review") {
        const auto it = charges.find(id);
        if (it == charges.end() || it->second.status != "needs_review") {
          forgiven(words, id, outcome.intent.key + " was told " + id + " is under review; it is " +
                          (it == charges.end() ? std::string("missing") : it->second.status));
        }
      }
    }
  }

  // 11. A client only ever refused, that walked away, is never charged without it.
  Invariant behind{"11. no charge captured behind the back of a client only ever refused (503, 429) that left"};
  for (const auto& outcome : outcomes) {
    if (!outcome.used || !outcome.walked_away || !outcome.only_told_to_retry) continue;
    ++behind.checked;
    const auto id = charge_of(outcome);
    if (!id.empty() && live_by_reference.count(id) > 0) {
      forgiven(behind, id, outcome.intent.key + " was only refused and left; " + id + " was captured without it");
    }
  }

  // 12. The window report's flags, run during the load: each on a charge the ledger disagrees with.
  Invariant flags{"12. every window-report flag is on a charge the ledger disagrees with"};
  for (const auto& [id, local] : charges) {
    if (local.failure_reason.rfind("window_", 0) != 0) continue;
    ++flags.checked;
    const auto& list = terminal_events[id];
    // The state the report flagged: the one announced before its needs_review (none: it was pending).
    const std::string before = list.size() >= 2 ? list[list.size() - 2]->type : "payments.charge.pending.v1";
    int live = 0, voided = 0;
    bool matching = true;
    for (const auto& c : ledger) {
      if (c.reference != id) continue;
      (c.voided ? voided : live) += 1;
      matching = matching && c.amount == local.amount && c.currency == local.currency;
    }
    bool agrees = false;
    if (before == "payments.charge.captured.v1") agrees = live == 1 && voided == 0 && matching;
    if (before == "payments.charge.failed.v1") agrees = live == 0 && voided == 0;
    if (before == "payments.charge.canceled.v1") agrees = live == 0 && voided == 1 && matching;
    if (before == "payments.charge.pending.v1") agrees = live + voided <= 1 && matching;
    if (agrees) {
      flags.Violation(id + " flagged " + local.failure_reason + " after " + before + ", but the ledger agrees (" +
                      std::to_string(live) + " live, " + std::to_string(voided) + " voided)");
    }
  }

  // 13. A capture is never recorded once its void is under way: every `captured` event of a charge comes
  // before the acquirer voided that charge's capture. (Both times are this machine's clock: the database's
  // and acquirer-sim's; RFC 3339 in UTC with milliseconds compares as text.)
  Invariant after_void{"13. no capture recorded after the acquirer voided it (a stale proof after a void)"};
  std::map<std::string, std::string> voided_at;  // charge -> when its capture was voided
  for (const auto& c : ledger) {
    if (c.voided && !c.voided_at.empty()) voided_at[c.reference] = c.voided_at;
  }
  after_void.checked = static_cast<std::int64_t>(voided_at.size());  // the voided charges whose events were searched for a late capture
  for (const auto& e : events) {
    if (e.type != "payments.charge.captured.v1") continue;
    const auto it = voided_at.find(e.charge);
    if (it == voided_at.end()) continue;
    if (e.time > it->second) {
      after_void.Violation(e.charge + " recorded captured at " + e.time + ", after its capture was voided at " +
                           it->second);
    }
  }

  verdict.invariants = {once, owned, backed, settled, truthful, announced, delivered, conforming,
                        per_order, words, behind, flags, after_void};

  // 14. The window report over the whole load finds every capture whose charge the database forgot.
  if (options.window_report_ran) {
    Invariant found{"14. every capture without a local charge (a forgotten commit) is recorded by the window report"};
    for (const auto& c : ledger) {
      if (charges.count(c.reference) > 0) continue;
      ++found.checked;
      if (orphans_recorded.count(c.id) == 0) found.Violation(c.id + " (" + c.reference + ") is not in orphan_captures");
    }
    verdict.invariants.push_back(found);
  }

  std::int64_t told_gone = 0, recorded = 0;
  for (const auto& outcome : outcomes) {
    if (outcome.used && !outcome.charge_id.empty() && charges.count(outcome.charge_id) == 0) ++told_gone;
  }
  for (const auto& c : ledger) {
    if (charges.count(c.reference) == 0 && orphans_recorded.count(c.id) > 0) ++recorded;
  }
  std::set<std::string> gone_on_topic;
  for (const auto& m : messages) {
    if (charges.count(m.key) == 0) gone_on_topic.insert(m.key);
  }
  verdict.forgotten = {
      {"a. captures whose charge the database forgot", static_cast<std::int64_t>(forgotten_references.size())},
      {"b. of a, recorded by the window report (orphan_captures)", recorded},
      {"c. charges a retry of the same key created again", recreated},
      {"d. intents told about a charge the database no longer has", told_gone},
      {"e. charges on the topic that the database no longer has", static_cast<std::int64_t>(gone_on_topic.size())},
      {"f. events on the topic the database forgot, of charges it has", static_cast<std::int64_t>(forgotten_events.size())},
  };
  return verdict;
}

}  // namespace charge_outbox::chaos
