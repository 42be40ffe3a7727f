#include "orphan_commands.hpp"

#include <boost/json/object.hpp>
#include <boost/json/serialize.hpp>

#include <cstdio>

#include "charge_outbox/db/retry.hpp"
#include "resolution.hpp"

namespace charge_outbox::charge_admin {
namespace {

namespace asio = boost::asio;
namespace json = boost::json;
using charges::OrphanCapture;
using charges::OrphanStatus;
using Kind = AcquirerView::Kind;

constexpr int kDone = 0;
constexpr int kNotDone = 1;

int DatabaseFailed(OrphanTools& t, const db::DbError& e) {
  t.err << "the database did not answer (" << db::ToString(e.code) << ": " << e.detail << "); nothing changed\n";
  return kNotDone;
}

// What the acquirer says now about the capture, asked by its key with what the listing showed as the
// expected capture. A capture under the key that is another one is a mismatch.
asio::awaitable<AcquirerView> AskTheAcquirer(OrphanTools& t, const OrphanCapture& orphan) {
  const auto& c = orphan.capture;
  if (!c.idempotency_key) {
    co_return AcquirerView{Kind::kUnanswered, std::nullopt,
                           "not asked: the acquirer's listing gave no key for it, and captures are looked up by key"};
  }
  const acquirer::LookupRequest lookup{*c.idempotency_key, acquirer::ExpectedCapture{c.amount, c.currency, c.reference}};
  const auto run = co_await acquirer::LookupWithRetries(t.acquirer, lookup, t.policy, t.clock);
  auto view = ReadLookup(run);
  if (view.capture && view.capture->id != c.id) {
    view.kind = Kind::kMismatch;
    view.words = "another capture under its key (" + view.capture->id + ")";
  }
  co_return view;
}

std::string Settled(const OrphanCapture& o) {
  std::string s(charges::ToString(o.status));
  if (o.adopted_charge_id) s += " as " + *o.adopted_charge_id;
  if (o.resolved_by) s += " by " + *o.resolved_by;
  if (o.resolved_at) s += " at " + *o.resolved_at;
  return s;
}

std::string LastVoid(const OrphanCapture& o) {
  if (o.voids_recorded == 0) return "none asked";
  std::string s = std::to_string(o.voids_recorded) + " asked, the last ";
  if (!o.last_void_outcome) return s + "unanswered (or its answer was lost): it may have voided";
  s += "answered " + *o.last_void_outcome;
  if (o.last_void_http_status) s += " (HTTP " + std::to_string(*o.last_void_http_status) + ")";
  return s;
}

// A void on record that may have voided: asked, and not refused as a request (which proves it did not).
bool VoidMayHaveLanded(const OrphanCapture& o) {
  return o.voids_recorded > 0 && o.last_void_outcome != std::string(acquirer::ToString(acquirer::OutcomeKind::kContractError));
}

json::object OrphanJson(const OrphanCapture& o) {
  const auto& c = o.capture;
  json::object j{{"capture_id", c.id},
                 {"reference", c.reference},
                 {"amount", c.amount},
                 {"currency", c.currency},
                 {"captured_at", c.created_at},
                 {"listed_status", acquirer::ToString(c.status)},
                 {"window", json::object{{"from", o.window_from}, {"to", o.window_to}}},
                 {"first_seen_at", o.first_seen_at},
                 {"last_seen_at", o.last_seen_at},
                 {"status", charges::ToString(o.status)},
                 {"voids_recorded", o.voids_recorded}};
  if (c.idempotency_key) j["idempotency_key"] = *c.idempotency_key;
  if (o.last_void_outcome) j["last_void_outcome"] = *o.last_void_outcome;
  if (o.last_void_http_status) j["last_void_http_status"] = *o.last_void_http_status;
  if (o.adopted_charge_id) j["adopted_charge_id"] = *o.adopted_charge_id;
  if (o.resolved_by) j["resolved_by"] = *o.resolved_by;
  if (o.resolved_at) j["resolved_at"] = *o.resolved_at;
  return j;
}

// The orphan a command is about. nullopt: said why on err, with `status`.
asio::awaitable<std::optional<OrphanCapture>> TheOrphan(OrphanTools& t, const CommandLine& cl, int& status) {
  const auto find = [&] { return t.orphans.Find(cl.capture_id); };
  const auto found = co_await db::WithDbRetries(find);
  if (!found) {
    status = DatabaseFailed(t, found.error());
    co_return std::nullopt;
  }
  if (!*found) {
    t.err << "no capture " << cl.capture_id << " among the captures without a charge of ours (orphan list --all "
          << "shows them; the window report records them)\n";
    status = kNotDone;
  }
  co_return *found;
}

// What a person can do with an open orphan, as commands.
void NextSteps(OrphanTools& t, const OrphanCapture& o, const AcquirerView& now) {
  const auto& id = o.capture.id;
  if (now.kind == Kind::kVoidedCapture) {
    t.out << "next: the money went back already; orphan void " << id
          << " --reason TEXT --by NAME records it (the acquirer answers the same void)\n";
    return;
  }
  const auto colon = o.capture.idempotency_key ? o.capture.idempotency_key->find(':') : std::string::npos;
  const bool ours = colon != std::string::npos && charges::UuidFromPublicId(o.capture.reference).has_value();
  if (ours) {
    t.out << "next: if the money is rightly merchant " << o.capture.idempotency_key->substr(0, colon)
          << "'s (its charge's record was lost): orphan adopt " << id << " --merchant "
          << o.capture.idempotency_key->substr(0, colon) << " --order ORDER_ID --reason TEXT --by NAME\n"
          << "      if not: orphan void " << id << " --reason TEXT --by NAME\n";
  } else {
    t.out << "next: its key and reference are not charge-api's, so it was not made by us and is not adopted; "
          << "orphan void " << id << " --reason TEXT --by NAME gives the money back, or take it up with the acquirer\n";
  }
}

}  // namespace

AdoptionTarget AdoptionTargetOf(const acquirer::Capture& capture, const std::string& merchant_id) {
  AdoptionTarget target;
  const auto uuid = charges::UuidFromPublicId(capture.reference);
  const std::string prefix = merchant_id + ":";
  if (!uuid) {
    target.refusal = "its reference '" + capture.reference.substr(0, 80) +
                     "' is not a charge id of ours: charge-api did not make this capture";
  } else if (!capture.idempotency_key) {
    target.refusal = "the acquirer gave no key for it, so nothing says whose it is";
  } else if (capture.idempotency_key->rfind(prefix, 0) != 0 || capture.idempotency_key->size() == prefix.size()) {
    target.refusal = "its key '" + capture.idempotency_key->substr(0, 80) + "' is not merchant " + merchant_id +
                     "'s (charge-api's keys are MERCHANT:KEY)";
  } else {
    target.charge_id = *uuid;
    target.idempotency_key = capture.idempotency_key->substr(prefix.size());
  }
  return target;
}

std::string VoidKeyOf(const acquirer::Capture& capture) {
  return capture.idempotency_key ? *capture.idempotency_key : "orphan-void:" + capture.id;
}

asio::awaitable<int> ListOrphans(OrphanTools t, const CommandLine& cl) {
  const auto list = [&] { return t.orphans.List(cl.all, cl.limit); };
  const auto found = co_await db::WithDbRetries(list);
  if (!found) co_return DatabaseFailed(t, found.error());
  if (!cl.json) {
    char header[256];
    std::snprintf(header, sizeof header, "%-32s  %-8s  %14s %-3s  %-27s  %-35s  %s", "capture", "status", "amount", "",
                  "captured at", "reference", "the acquirer now");
    t.out << header << "\n";
  }
  for (const auto& o : *found) {
    // Only an open one needs the acquirer's word now; a settled one says how it was settled. Assigned, not
    // a conditional around the co_await: GCC 12 destroys such temporaries twice.
    const bool open = o.status == OrphanStatus::kOpen;
    AcquirerView now{Kind::kUnanswered, std::nullopt, Settled(o)};
    if (open) {
      auto asked = co_await AskTheAcquirer(t, o);
      now = std::move(asked);
    }
    if (cl.json) {
      auto j = OrphanJson(o);
      if (open) j["acquirer_now"] = now.words;
      t.out << json::serialize(j) << "\n";
      continue;
    }
    char line[512];
    std::snprintf(line, sizeof line, "%-32s  %-8s  %14lld %-3s  %-27s  %-35s  ", o.capture.id.substr(0, 32).c_str(),
                  std::string(charges::ToString(o.status)).c_str(), static_cast<long long>(o.capture.amount),
                  o.capture.currency.c_str(), o.capture.created_at.c_str(), o.capture.reference.substr(0, 35).c_str());
    t.out << line << now.words << "\n";
  }
  if (!cl.json) t.out << found->size() << " capture(s) without a charge of ours" << (cl.all ? "" : ", open") << "\n";
  co_return kDone;
}

asio::awaitable<int> ShowOrphan(OrphanTools t, const CommandLine& cl) {
  int status = kDone;
  const auto orphan = co_await TheOrphan(t, cl, status);
  if (!orphan) co_return status;
  const auto read = [&] { return t.orphans.Actions(*orphan); };
  const auto actions = co_await db::WithDbRetries(read);
  if (!actions) co_return DatabaseFailed(t, actions.error());
  // A charge of ours may hold the reference since the report ran (written back by hand, or restored).
  std::optional<charges::Charge> holder;
  if (const auto uuid = charges::UuidFromPublicId(orphan->capture.reference)) {
    const auto find = [&] { return t.review.Find(*uuid); };
    const auto found = co_await db::WithDbRetries(find);
    if (!found) co_return DatabaseFailed(t, found.error());
    holder = *found;
  }
  const auto now = co_await AskTheAcquirer(t, *orphan);
  const auto& c = orphan->capture;
  if (cl.json) {
    auto j = OrphanJson(*orphan);
    j["acquirer_now"] = now.words;
    if (holder) j["charge_now"] = json::object{{"id", holder->public_id()}, {"status", charges::ToString(holder->status)}};
    json::array a;
    for (const auto& x : *actions) {
      a.push_back({{"at", x.at}, {"operator", x.operator_name}, {"action", x.action}, {"subject", x.subject},
                   {"reason", x.reason}, {"after", x.after.value_or("")}});
    }
    j["actions"] = std::move(a);
    t.out << json::serialize(j) << "\n";
    co_return kDone;
  }
  t.out << "capture " << c.id << " without a charge of ours (capture_without_local_record)\n"
        << "  " << c.amount << " " << c.currency << ", reference " << c.reference << ", key "
        << c.idempotency_key.value_or("(none listed)") << ", captured " << c.created_at << ", listed "
        << acquirer::ToString(c.status) << "\n"
        << "  found by the window report of [" << orphan->window_from << ", " << orphan->window_to << ") at "
        << orphan->first_seen_at << ", last seen " << orphan->last_seen_at << "\n"
        << "  status " << Settled(*orphan) << "; voids: " << LastVoid(*orphan) << "\n";
  if (holder) {
    t.out << "  a charge of ours holds its reference now: " << holder->public_id() << " ("
          << charges::ToString(holder->status) << "): review show " << holder->public_id() << "\n";
  }
  for (const auto& x : *actions) {
    t.out << "  " << x.at << "  " << x.operator_name << "  " << x.action << ": " << x.before.value_or("?") << " -> "
          << x.after.value_or("?") << "; why: " << x.reason;
    if (x.acquirer_said) t.out << "; the acquirer said: " << *x.acquirer_said;
    t.out << "\n";
  }
  t.out << "the acquirer now: " << now.words << "\n";
  if (orphan->status == OrphanStatus::kOpen && !holder) NextSteps(t, *orphan, now);
  co_return kDone;
}

asio::awaitable<int> VoidOrphan(OrphanTools t, const CommandLine& cl) {
  int status = kDone;
  const auto orphan = co_await TheOrphan(t, cl, status);
  if (!orphan) co_return status;
  // Settled: say how, and send nothing.
  const auto settled = [&](const OrphanCapture& o) {
    if (o.status == OrphanStatus::kVoided) {
      t.out << "capture " << o.capture.id << " is already " << Settled(o) << "; nothing sent\n";
      return kDone;
    }
    t.err << "refused: capture " << o.capture.id << " was " << Settled(o) << ": it is a charge of ours now "
          << "(review show " << o.adopted_charge_id.value_or("?") << "); nothing sent\n";
    return kNotDone;
  };
  if (orphan->status != OrphanStatus::kOpen) co_return settled(*orphan);
  // Another person settled it since it was read: say how, from the row as it is now.
  const auto settled_since = [&](const std::string& what) -> asio::awaitable<int> {
    const auto again = [&] { return t.orphans.Find(orphan->capture.id); };
    const auto now = co_await db::WithDbRetries(again);
    if (now && *now) co_return settled(**now);
    t.err << "capture " << orphan->capture.id << " changed meanwhile" << what << ". Look again with orphan show\n";
    co_return kNotDone;
  };

  // Counted before it is sent: a void that cannot be recorded is not sent, and an adoption racing it sees it.
  const auto start = [&] { return t.orphans.StartVoid(orphan->capture.id); };
  const auto started = co_await db::WithDbRetries(start);
  if (!started) {
    t.err << "the database did not answer (" << db::ToString(started.error().code) << ": " << started.error().detail
          << "); nothing was sent to the acquirer. Run it again\n";
    co_return kNotDone;
  }
  if (!*started) {
    // Named: GCC 12 destroys a temporary of a co_await expression twice.
    const std::string what = "; nothing sent";
    const int status_now = co_await settled_since(what);
    co_return status_now;
  }

  // After a void whose error the acquirer stored under its key (Stripe's 500), the next goes under a key of
  // its own (acquirer::VoidRequest), named by the count of voids so far: the stored key only replays the error.
  const bool stored_error = orphan->last_void_outcome == acquirer::ToString(acquirer::OutcomeKind::kStoredError);
  const acquirer::VoidRequest request{orphan->capture.id, VoidKeyOf(orphan->capture),
                                      stored_error ? orphan->voids_recorded : 0};
  const auto run = co_await acquirer::VoidWithRetries(t.acquirer, request, t.policy, t.clock);
  const auto& last = run.last();
  const bool voided = VoidConfirmed(run);
  std::string said = voided ? "voided " + orphan->capture.id
                            : "the void was answered " + std::string(acquirer::ToString(last.kind)) +
                                  (last.http_status ? " (HTTP " + std::to_string(*last.http_status) + ")" : "");
  const charges::OrphanVoid answer{orphan->capture.id, last.kind, last.http_status, cl.by, cl.reason, said};
  const auto finish = [&] { return t.orphans.FinishVoid(answer); };
  const auto recorded = co_await db::WithDbRetries(finish);
  if (!recorded) {
    // The answer is the acquirer's either way; only its record is in doubt.
    t.err << "the acquirer said: " << said << "; recording it failed (" << db::ToString(recorded.error().code) << ": "
          << recorded.error().detail << "): the record may or may not show it (orphan show " << orphan->capture.id
          << " tells). orphan void again asks the same void, answered the same, and records it\n";
    co_return kNotDone;
  }
  // Another person settled it between the count and the answer.
  if (!*recorded) {
    const std::string what = " (the acquirer said: " + said + ")";
    const int status_now = co_await settled_since(what);
    co_return status_now;
  }
  if (voided) {
    t.out << "voided " << orphan->capture.id << " (" << orphan->capture.amount << " " << orphan->capture.currency
          << ", reference " << orphan->capture.reference << ") by " << cl.by
          << ": the acquirer confirms it; the money goes back to the card\n";
    co_return kDone;
  }
  if (last.kind == acquirer::OutcomeKind::kStoredError) {
    // Not a refusal: Stripe stores a 500 under the key whether or not the refund happened.
    t.err << "unknown: " << said << ", on record; the capture stays open. The acquirer stored an error under the "
          << "void's key: whether it gave the money back is not known. Run orphan void again: it asks under a new "
          << "key, and a capture already refunded refuses a second refund\n";
  } else if (last.retryability() == retry::Retryability::kNever) {
    // Refused as a request (a capture past the acquirer's void window, our credentials): the same void gets
    // the same answer, and the refusal proves it voided nothing.
    t.err << "refused: " << said << ", on record; the capture stays open. The acquirer refused the void: asking "
          << "again will not change that. The capture stands: if the money must go back, refund it at the "
          << "acquirer; if it is rightly a merchant's, orphan adopt\n";
  } else {
    t.err << "unknown: " << said << ", on record; the capture stays open. The void may or may not have voided. "
          << "Run orphan void again: the same void is asked again\n";
  }
  co_return kNotDone;
}

asio::awaitable<int> AdoptOrphan(OrphanTools t, const CommandLine& cl) {
  int status = kDone;
  const auto orphan = co_await TheOrphan(t, cl, status);
  if (!orphan) co_return status;
  const auto not_open = [&](const OrphanCapture& o, const AdoptionTarget& target) {
    if (o.status == OrphanStatus::kAdopted && target.refusal.empty() &&
        o.adopted_charge_id == charges::PublicChargeId(target.charge_id)) {
      t.out << "capture " << o.capture.id << " is already " << Settled(o) << "; nothing changed\n";
      return kDone;
    }
    t.err << "refused: capture " << o.capture.id << " is " << Settled(o)
          << (o.status == OrphanStatus::kVoided ? ": the money went back" : "") << "; nothing changed\n";
    return kNotDone;
  };
  const auto target = AdoptionTargetOf(orphan->capture, *cl.merchant_id);
  if (orphan->status != OrphanStatus::kOpen) co_return not_open(*orphan, target);
  if (!target.refusal.empty()) {
    t.err << "refused: " << target.refusal << ". Adopting writes back a charge of ours whose record was lost; this "
          << "is not one. Nothing changed\n";
    co_return kNotDone;
  }
  if (VoidMayHaveLanded(*orphan)) {
    t.err << "refused: a void of it is on record (" << LastVoid(*orphan) << "); nothing changed. orphan void "
          << orphan->capture.id << " asks the same void again and records its answer; adopt only if it is refused\n";
    co_return kNotDone;
  }
  const auto now = co_await AskTheAcquirer(t, *orphan);
  if (now.kind != Kind::kLiveCapture) {
    t.err << "refused: adopting needs the acquirer to hold the capture live, and it says: " << now.words
          << "; nothing changed\n";
    co_return kNotDone;
  }
  const charges::Adoption adoption{orphan->capture.id, target.charge_id,  *cl.merchant_id,  target.idempotency_key,
                                   *cl.order_id,       orphan->voids_recorded, cl.by, cl.reason, now.words};
  const auto adopt = [&] { return t.orphans.Adopt(adoption); };
  const auto result = co_await db::WithDbRetries(adopt);
  if (!result) {
    if (result.error().code == db::DbErrc::kFailed) {
      // Refused by the server (a charge under the key written meanwhile, say): the statement did nothing.
      t.err << "the database refused the adoption (" << result.error().detail << "); nothing changed. Look again "
            << "with orphan show " << orphan->capture.id << "\n";
    } else {
      t.err << "the database did not answer (" << db::ToString(result.error().code) << ": " << result.error().detail
            << "); the adoption may or may not have landed: orphan show " << orphan->capture.id << " tells\n";
    }
    co_return kNotDone;
  }
  using Outcome = charges::AdoptResult::Outcome;
  switch (result->outcome) {
    case Outcome::kAdopted: {
      const auto& ch = *result->charge;
      t.out << "adopted " << orphan->capture.id << " as charge " << ch.public_id() << " of merchant " << ch.merchant_id
            << " (key " << ch.idempotency_key << ", order " << ch.order_id << ", " << ch.amount << " " << ch.currency
            << "): captured by " << cl.by << "; events payments.charge.initiated.v1 and payments.charge.captured.v1"
            << " (sequences 1 and 2); the acquirer said: " << now.words << "\n";
      t.err << "a client retrying under key " << ch.idempotency_key << " is answered 422 naming the charge (its "
            << "request is not on record); GET /v1/charges/" << ch.public_id() << " shows it captured\n";
      co_return kDone;
    }
    case Outcome::kOrphanChanged:
      if (result->orphan && result->orphan->status != OrphanStatus::kOpen) co_return not_open(*result->orphan, target);
      t.err << "refused: a void of " << orphan->capture.id << " was recorded since this command read it (another "
            << "person voiding it?); nothing changed. Look again with orphan show\n";
      co_return kNotDone;
    case Outcome::kNoSuchMerchant:
      t.err << "no merchant " << *cl.merchant_id << " (merchant list shows them); nothing changed\n";
      co_return kNotDone;
    case Outcome::kChargeExists:
      t.err << "refused: charge " << result->charge->public_id() << " ("
            << charges::ToString(result->charge->status) << ") holds the capture's charge id or merchant "
            << *cl.merchant_id << "'s key " << target.idempotency_key << " already; nothing changed. review show "
            << result->charge->public_id() << " tells its story\n";
      co_return kNotDone;
  }
  co_return kNotDone;
}

}  // namespace charge_outbox::charge_admin
