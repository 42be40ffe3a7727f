#include "review_commands.hpp"

#include <boost/json/array.hpp>
#include <boost/json/serialize.hpp>

#include "charge_outbox/charges/attempt_recorder.hpp"
#include "charge_outbox/db/retry.hpp"
#include "merchant_commands.hpp"
#include "orphan_commands.hpp"
#include "resolution.hpp"
#include "timeline.hpp"

namespace charge_outbox::charge_admin {
namespace {

namespace asio = boost::asio;
using charges::Charge;
using charges::ChargeStatus;

constexpr int kDone = 0;
constexpr int kNotDone = 1;

int DatabaseFailed(Tools& t, const db::DbError& e) {
  t.err << "the database did not answer (" << db::ToString(e.code) << ": " << e.detail << "); nothing changed\n";
  return kNotDone;
}

// The charge a command is about: by id, or by a merchant's idempotency key. nullopt: said why on err.
asio::awaitable<std::optional<Charge>> TheCharge(Tools& t, const CommandLine& cl, int& status) {
  db::DbResult<std::optional<Charge>> found;
  if (cl.charge_id) {
    const auto find = [&] { return t.review.Find(*cl.charge_id); };
    found = co_await db::WithDbRetries(find);
  } else {
    const auto find = [&] { return t.charges.FindByKey(*cl.merchant_id, *cl.key); };
    found = co_await db::WithDbRetries(find);
  }
  if (!found) {
    status = DatabaseFailed(t, found.error());
    co_return std::nullopt;
  }
  if (!*found) {
    t.err << "no such charge\n";
    status = kNotDone;
  }
  co_return *found;
}

// The finish of a call's last attempt written now; its attempt number (nullopt: none was recorded).
asio::awaitable<std::optional<int>> FinishOnRecord(Tools& t, const Charge& charge,
                                                   charges::AttemptRecorder& recorder) {
  auto finish = recorder.TakeLastFinish();
  if (!finish) co_return std::nullopt;
  const auto write = [&] { return t.charges.FinishAttempt(charge.id, *finish); };
  // Named: GCC 12 destroys a discarded temporary of a co_await expression twice.
  const auto written = co_await db::WithDbRetries(write);
  if (!written) t.err << "(the acquirer's answer could not be written on record: " << written.error().detail << ")\n";
  co_return finish->attempt_no;
}

// A fresh lookup of the charge's key, on record like every actor's (actor charge-admin, no lease: the
// charge is in review, or the person is only looking).
asio::awaitable<AcquirerView> AskTheAcquirer(Tools& t, const Charge& charge) {
  charges::AttemptRecorder recorder(t.charges, charge.id, acquirer::Operation::kLookup, kActor, "");
  const acquirer::LookupRequest lookup{charges::AcquirerIdempotencyKey(charge),
                                       acquirer::ExpectedCapture{charge.amount, charge.currency, charge.public_id()},
                                       charge.created_at};
  const auto call = [&](std::string request_id) { return t.acquirer.LookupByKey(lookup, std::move(request_id)); };
  const auto run = co_await charges::RunRecorded(t.policy, t.clock, recorder, call);
  [[maybe_unused]] const auto recorded = co_await FinishOnRecord(t, charge, recorder);
  co_return ReadLookup(run);
}

asio::awaitable<int> List(Tools& t, const CommandLine& cl) {
  const charges::ReviewFilter filter{cl.merchant_id, cl.reason_filter, cl.older_than, cl.limit};
  const auto list = [&] { return t.review.List(filter); };
  const auto items = co_await db::WithDbRetries(list);
  if (!items) co_return DatabaseFailed(t, items.error());
  if (!cl.json) t.out << ChargeRowHeader() << "  in review for\n";
  for (const auto& item : *items) {
    if (cl.json) {
      auto o = ChargeJson(item.charge);
      o["in_review_for_seconds"] = item.in_review_for.count() / 1000;
      t.out << boost::json::serialize(o) << "\n";
    } else {
      t.out << ChargeRow(item.charge) << "  " << FormatDuration(item.in_review_for) << "\n";
    }
  }
  if (!cl.json) t.out << items->size() << " charge(s) in needs_review\n";
  co_return kDone;
}

asio::awaitable<int> Find(Tools& t, const CommandLine& cl) {
  std::vector<Charge> found;
  if (cl.order_id) {
    const auto find = [&] { return t.review.FindByOrder(*cl.merchant_id, *cl.order_id); };
    auto r = co_await db::WithDbRetries(find);
    if (!r) co_return DatabaseFailed(t, r.error());
    found = std::move(*r);
  } else {
    int status = kDone;
    auto charge = co_await TheCharge(t, cl, status);
    if (!charge) co_return status;
    found.push_back(std::move(*charge));
  }
  if (found.empty()) {
    t.err << "no charge for that order\n";
    co_return kNotDone;
  }
  if (!cl.json) t.out << ChargeRowHeader() << "\n";
  for (const auto& c : found) t.out << (cl.json ? boost::json::serialize(ChargeJson(c)) : ChargeRow(c)) << "\n";
  co_return kDone;
}

asio::awaitable<int> Show(Tools& t, const CommandLine& cl) {
  int status = kDone;
  const auto charge = co_await TheCharge(t, cl, status);
  if (!charge) co_return status;
  const auto read = [&] { return t.review.History(*charge); };
  const auto history = co_await db::WithDbRetries(read);
  if (!history) co_return DatabaseFailed(t, history.error());
  const auto now = co_await AskTheAcquirer(t, *charge);
  const auto timeline = Timeline(*charge, *history);
  if (cl.json) {
    boost::json::array entries;
    for (const auto& e : timeline) entries.push_back({{"at", e.at}, {"actor", e.actor}, {"what", e.what}});
    boost::json::object o{{"charge", ChargeJson(*charge)}, {"timeline", std::move(entries)}, {"acquirer_now", now.words}};
    t.out << boost::json::serialize(o) << "\n";
    co_return kDone;
  }
  t.out << "charge " << charge->public_id() << " (" << charge->id << ")\n"
        << "  merchant " << charge->merchant_id << ", key " << charge->idempotency_key << ", order "
        << charge->order_id << ", " << charge->amount << " " << charge->currency << "\n"
        << "  status " << charges::ToString(charge->status);
  if (charge->failure_reason) t.out << " (" << *charge->failure_reason << ")";
  if (charge->acquirer_capture_id) t.out << ", capture " << *charge->acquirer_capture_id;
  if (charge->decline_code) t.out << ", declined " << *charge->decline_code;
  t.out << "\ntimeline\n";
  for (const auto& e : timeline) t.out << "  " << e.at << "  " << e.actor << "  " << e.what << "\n";
  t.out << "the acquirer now: " << now.words << "\n";
  co_return kDone;
}

std::string Decided(const std::optional<charges::OperatorAction>& a) {
  if (!a) return "";
  return " (" + a->after.value_or("?") + " by " + a->operator_name + " at " + a->at + ": " + a->reason + ")";
}

// The charge is not in review (any more): the same decision already on record is done; anything else
// is not this command's to change.
asio::awaitable<int> NotInReview(Tools& t, const CommandLine& cl, const Charge& charge) {
  // Named: the store's coroutine holds a reference to it until it is awaited.
  const auto public_id = charge.public_id();
  const auto last_call = [&] { return t.review.LastResolution(public_id); };
  const auto last = co_await db::WithDbRetries(last_call);
  if (!last) t.err << "(who decided it could not be read: " << last.error().detail << ")\n";
  const auto decided = last ? *last : std::nullopt;
  if (charge.status == cl.to && decided && decided->after == std::string(charges::ToString(cl.to))) {
    t.out << charge.public_id() << " is already " << charges::ToString(cl.to) << Decided(decided)
          << "; nothing changed\n";
    co_return kDone;
  }
  t.err << charge.public_id() << " is " << charges::ToString(charge.status) << ", not in needs_review"
        << Decided(decided) << "; nothing changed\n";
  co_return kNotDone;
}

asio::awaitable<int> Resolve(Tools& t, const CommandLine& cl) {
  int status = kDone;
  const auto charge = co_await TheCharge(t, cl, status);
  if (!charge) co_return status;
  if (charge->status != ChargeStatus::kNeedsReview) co_return co_await NotInReview(t, cl, *charge);

  // Read before the acquirer is asked: a void recorded after this (another person's) makes its answer stale.
  const auto voids_read = [&] { return t.review.VoidsOnRecord(charge->id); };
  const auto voids = co_await db::WithDbRetries(voids_read);
  if (!voids) co_return DatabaseFailed(t, voids.error());
  std::optional<int> voids_seen = *voids;
  const auto said = co_await AskTheAcquirer(t, *charge);
  const auto verdict = Decide(cl.to, said, cl.against_acquirer.has_value());
  if (verdict.step == Verdict::Step::kRefuse) {
    t.err << "refused: " << verdict.why << "\n";
    co_return kNotDone;
  }
  std::string acquirer_said = said.words;
  if (verdict.step == Verdict::Step::kVoidThenResolve) {
    // The charge's own key, as the reconciler's void uses: a repeated void (this command again, or a
    // person racing another) is the same void at the acquirer.
    // After a void whose error the acquirer stored under its key (Stripe's 500), the next goes under a key
    // of its own: the old one only replays the error (acquirer::VoidRequest).
    const auto history_call = [&] { return t.charges.ReadAttemptHistory(charge->id); };
    const auto history = co_await db::WithDbRetries(history_call);
    if (!history) co_return DatabaseFailed(t, history.error());
    charges::AttemptRecorder recorder(t.charges, charge->id, acquirer::Operation::kVoid, kActor, "", std::nullopt,
                                      std::nullopt, /*in_review=*/true);
    const acquirer::VoidRequest request{*verdict.capture_id, charges::AcquirerIdempotencyKey(*charge),
                                        history->void_stored_errors};
    const auto call = [&](std::string request_id) { return t.acquirer.Void(request, std::move(request_id)); };
    const auto run = co_await charges::RunRecorded(t.policy, t.clock, recorder, call);
    // This decision's own void, if it was recorded, is one the count now holds.
    if (const auto void_no = co_await FinishOnRecord(t, *charge, recorder)) voids_seen = *voids_seen + 1;
    if (recorder.refusal()) {
      // Not recorded, so not sent: another decision settled the charge since it was read.
      const auto again = [&] { return t.review.Find(charge->id); };
      const auto now = co_await db::WithDbRetries(again);
      if (now && *now && (*now)->status != ChargeStatus::kNeedsReview) co_return co_await NotInReview(t, cl, **now);
    }
    if (!VoidConfirmed(run)) {
      const auto& last = run.last();
      t.err << "refused: the void of " << *verdict.capture_id << " was not confirmed (" << acquirer::ToString(last.kind);
      if (last.http_status) t.err << ", HTTP " << *last.http_status;
      t.err << "); the charge stays in needs_review, its void on record. ";
      if (last.kind == acquirer::OutcomeKind::kStoredError) {
        // The refund may or may not have happened; the acquirer stored its error under the key. The next
        // void goes under a key of its own, and a capture already refunded in full refuses another refund.
        t.err << "The acquirer stored an error under the void's key: whether it gave the money back is not "
              << "known. Run the command again: it reads the capture afresh and voids under a new key\n";
      } else if (last.retryability() == retry::Retryability::kNever) {
        // Refused as a request (a capture past the acquirer's void window, our credentials): the same void
        // gets the same answer. The capture stands; the money comes back, if it must, by a refund.
        t.err << "The acquirer refused it: asking again will not change that. If the money is kept, decide "
              << "captured; a refund, if one is due, is made at the acquirer\n";
      } else {
        t.err << "Run the command again: the same void is asked again\n";
      }
      co_return kNotDone;
    }
    acquirer_said += "; voided by this decision";
  }
  const auto capture_id = verdict.capture_id ? verdict.capture_id : charge->acquirer_capture_id;
  if (cl.to == ChargeStatus::kCaptured && !capture_id) {
    t.err << "refused: a captured charge names its acquirer capture, and none is known; nothing changed\n";
    co_return kNotDone;
  }
  charges::Resolution resolution;
  resolution.charge_id = charge->id;
  resolution.expected_reason = charge->failure_reason;
  resolution.to = cl.to;
  resolution.capture_id = capture_id;
  resolution.failure_reason = verdict.failure_reason;
  resolution.operator_name = cl.by;
  resolution.reason = cl.against_acquirer ? cl.reason + " [against the acquirer: " + *cl.against_acquirer + "]" : cl.reason;
  resolution.acquirer_said = acquirer_said;
  resolution.against_acquirer = cl.against_acquirer.has_value();
  resolution.voids_seen = voids_seen;
  const auto resolve = [&] { return t.review.Resolve(resolution); };
  const auto result = co_await db::WithDbRetries(resolve);
  if (!result) {
    // The decision's statement may have committed before its answer was lost.
    t.err << "the database did not answer (" << db::ToString(result.error().code) << ": " << result.error().detail
          << "); the decision may or may not have landed: review show " << charge->public_id() << " tells\n";
    co_return kNotDone;
  }
  if (!result->applied) {
    // Another decision (or actor) got there first: say what won.
    if (result->charge.status == ChargeStatus::kNeedsReview) {
      const auto voids_now_call = [&] { return t.review.VoidsOnRecord(charge->id); };
      const auto voids_now = co_await db::WithDbRetries(voids_now_call);
      if (voids_now && *voids_now != *voids_seen) {
        t.err << "refused: a void of " << charge->public_id() << " was recorded since this decision read the "
              << "charge (another person deciding it?); nothing changed. Look again with review show\n";
      } else if (cl.to == ChargeStatus::kCaptured && result->charge.failure_reason == charge->failure_reason) {
        t.err << "refused: a void of " << charge->public_id() << " is on record (another person's canceled, or "
              << "the reconciler's past the deadline) whose outcome is unknown: it may have reached the acquirer, "
              << "and captured would contradict it; nothing changed. --against-acquirer REASON overrides it, "
              << "on record\n";
      } else {
        t.err << "refused: " << charge->public_id() << " changed meanwhile (now needs_review, "
              << result->charge.failure_reason.value_or("?") << "); nothing changed; look again with review show\n";
      }
      co_return kNotDone;
    }
    co_return co_await NotInReview(t, cl, result->charge);
  }
  const auto& now = result->charge;
  t.out << "resolved " << now.public_id() << ": needs_review";
  if (charge->failure_reason) t.out << " (" << *charge->failure_reason << ")";
  t.out << " -> " << charges::ToString(now.status) << " by " << cl.by << "; event payments.charge."
        << charges::ToString(now.status) << ".v1 sequence " << now.last_sequence << "; the acquirer said: "
        << acquirer_said << (resolution.against_acquirer ? " (decided against it)" : "") << "\n";
  co_return kDone;
}

// The audit trail's retention: batches until nothing older is left, so no statement holds many locks.
asio::awaitable<int> Prune(Tools& t, const CommandLine& cl) {
  constexpr int kBatch = 1000;
  std::int64_t total = 0;
  for (;;) {
    const auto prune = [&] { return t.review.PruneActions(*cl.older_than, kBatch); };
    const auto gone = co_await db::WithDbRetries(prune);
    if (!gone) {
      // The failed batch may have been deleted before its answer was lost; a second run is harmless.
      t.err << total << " audit row(s) deleted before the database failed (" << db::ToString(gone.error().code)
            << ": " << gone.error().detail << "); the last batch may or may not be gone. Run it again\n";
      co_return kNotDone;
    }
    total += *gone;
    if (*gone < kBatch) break;
  }
  t.out << total << " audit row(s) older than " << FormatDuration(*cl.older_than) << " deleted\n";
  co_return kDone;
}

}  // namespace

asio::awaitable<int> RunCommand(Tools tools, const CommandLine& command) {
  const MerchantTools merchant_tools{tools.merchants, DrawApiKey, tools.out, tools.err};
  const OrphanTools orphan_tools{tools.orphans, tools.review, tools.acquirer, tools.policy,
                                 tools.clock,   tools.out,    tools.err};
  switch (command.command) {
    case CommandLine::Command::kReviewList: co_return co_await List(tools, command);
    case CommandLine::Command::kReviewShow: co_return co_await Show(tools, command);
    case CommandLine::Command::kReviewResolve: co_return co_await Resolve(tools, command);
    case CommandLine::Command::kChargeFind: co_return co_await Find(tools, command);
    case CommandLine::Command::kAuditPrune: co_return co_await Prune(tools, command);
    case CommandLine::Command::kMerchantAdd: co_return co_await AddMerchant(merchant_tools, command);
    case CommandLine::Command::kMerchantList: co_return co_await ListMerchants(merchant_tools, command);
    case CommandLine::Command::kKeyIssue:
    case CommandLine::Command::kKeyRotate: co_return co_await NewKey(merchant_tools, command);
    case CommandLine::Command::kKeyList: co_return co_await ListKeys(merchant_tools, command);
    case CommandLine::Command::kKeyRevoke: co_return co_await RevokeKey(merchant_tools, command);
    case CommandLine::Command::kOrphanList: co_return co_await ListOrphans(orphan_tools, command);
    case CommandLine::Command::kOrphanShow: co_return co_await ShowOrphan(orphan_tools, command);
    case CommandLine::Command::kOrphanVoid: co_return co_await VoidOrphan(orphan_tools, command);
    case CommandLine::Command::kOrphanAdopt: co_return co_await AdoptOrphan(orphan_tools, command);
  }
  co_return kNotDone;
}

}  // namespace charge_outbox::charge_admin
