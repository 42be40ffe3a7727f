// Window comparison: the acquirer's captures of a time window against our charges, matched by reference
// (the charge's public id) and confirmed by remote id, amount, currency, idempotency key and status
// (docs/background.md: a close timestamp alone never matches). Pure, so each kind of discrepancy is a unit test;
// WindowReconciliation does the I/O around it. WindowComparer takes the listing a page at a time and keeps
// only what later pages and the other direction need, so a window is never held whole.
#pragma once

#include <boost/json/object.hpp>

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <unordered_map>
#include <string>
#include <string_view>
#include <vector>

#include "charge_outbox/acquirer/model.hpp"
#include "charge_outbox/charges/charge.hpp"

namespace charge_outbox::reconciler {

enum class DiscrepancyKind {
  kCaptureWithoutLocalRecord,  // the acquirer captured for a reference we have no charge for
  kMissingAtAcquirer,          // our charge is captured; the acquirer has no capture for its key
  kMismatch,                   // both sides have it, and they disagree (see `fields`)
  kDuplicateCapture,           // a second capture names the same charge
};

std::string_view ToString(DiscrepancyKind kind);

struct Discrepancy {
  DiscrepancyKind kind = DiscrepancyKind::kMismatch;
  std::optional<acquirer::Capture> capture;  // the acquirer's side, when it has one
  std::optional<charges::Charge> charge;     // ours, when we have one
  // kMismatch: what differs, among "amount", "currency", "status", "capture_id", "idempotency_key".
  std::vector<std::string> fields;
};

struct WindowComparison {
  std::vector<Discrepancy> discrepancies;
  // Our captured charges with no capture in the listing. Not yet discrepancies: the capture may lie just
  // outside the window (the listing is by the acquirer's capture time); each is confirmed by key.
  std::vector<charges::Charge> unlisted;
  int matched = 0;               // a capture and a charge that agree
  int pending_with_capture = 0;  // charges still pending whose capture agrees: the sweep resolves them
};

// A charge's uuid in 16 bytes: what the comparer remembers of each charge the listing named.
using UuidKey = std::array<std::uint8_t, 16>;
std::optional<UuidKey> UuidKeyOf(std::string_view uuid);
struct UuidKeyHash {
  std::size_t operator()(const UuidKey& key) const noexcept;
};

// The comparison of one window, fed the acquirer's listing page by page, in its order. Memory: for each
// charge of ours some capture named, its uuid and two bits (about 60 bytes in the map), plus the rare
// capture that waits for the listing's end (below); never the listing itself.
//
// Which of several captures naming one charge is the genuine one (the others are duplicate_capture): the
// one our charge recorded (acquirer_capture_id), wherever it comes in the listing; without a record, the
// first listed. A capture of a charge whose recorded capture has not been listed yet waits: a later page
// may list the recorded one (then it is a duplicate), or none does (then it is the charge's capture, and
// differs in capture_id), which Finish() says. Not thread-safe.
class WindowComparer {
 public:
  // One page: its captures, and our charges (any status) whose public id they name (charges named by
  // earlier pages too). Returns the discrepancies it proves, in listing order.
  std::vector<Discrepancy> ComparePage(const std::vector<acquirer::Capture>& page,
                                       const std::vector<charges::Charge>& referenced);
  // After the last page: the captures that waited for a recorded capture never listed.
  std::vector<Discrepancy> Finish();

  // Whether some listed capture named this charge (its uuid).
  bool Listed(std::string_view uuid) const;
  int matched() const { return matched_; }
  int pending_with_capture() const { return pending_with_capture_; }
  std::size_t referenced() const { return listed_.size(); }  // charges of ours the listing named

 private:
  void Judge(const acquirer::Capture& capture, const charges::Charge& charge, std::vector<Discrepancy>& out);
  struct Waiting {
    acquirer::Capture capture;
    charges::Charge charge;
  };
  std::unordered_map<UuidKey, std::uint8_t, UuidKeyHash> listed_;  // kJudged | kRecordedListed
  std::map<UuidKey, Waiting> waiting_;
  int matched_ = 0;
  int pending_with_capture_ = 0;
};

// The whole window at once (one page): `captures`: the acquirer's listing of the window, in its order. `referenced`: our charges (any status)
// whose public id some capture names. `captured_in_window`: our captured charges whose capture may lie in
// the window (ReconciliationStore::FindCapturedInWindow).
WindowComparison CompareWindow(const std::vector<acquirer::Capture>& captures,
                               const std::vector<charges::Charge>& referenced,
                               const std::vector<charges::Charge>& captured_in_window);

// The differing fields of a capture and a charge that name each other ("" fields when they agree).
std::vector<std::string> DifferingFields(const acquirer::Capture& capture, const charges::Charge& charge);

// One discrepancy as its report line carries it (kind, charge_id or reference, fields, both sides).
boost::json::object DiscrepancyJson(const Discrepancy& discrepancy);

}  // namespace charge_outbox::reconciler
