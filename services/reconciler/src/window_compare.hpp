// Window comparison: the acquirer's captures of a time window against our charges, matched by reference
// (the charge's public id) and confirmed by remote id, amount, currency, idempotency key and status
// (docs/background.md: a close timestamp alone never matches). Pure, so each kind of discrepancy is a unit test;
// WindowReconciliation does the I/O around it.
#pragma once

#include <boost/json/object.hpp>

#include <optional>
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
  bool flagged = false;  // this run moved the charge to needs_review
  // kCaptureWithoutLocalRecord on a settled window: kept for a person (orphan_captures), with its status
  // there ("open", or "voided"/"adopted" once a person settled it).
  std::optional<std::string> recorded;
};

struct WindowComparison {
  std::vector<Discrepancy> discrepancies;
  // Our captured charges with no capture in the listing. Not yet discrepancies: the capture may lie just
  // outside the window (the listing is by the acquirer's capture time); each is confirmed by key.
  std::vector<charges::Charge> unlisted;
  int matched = 0;               // a capture and a charge that agree
  int pending_with_capture = 0;  // charges still pending whose capture agrees: the sweep resolves them
};

// `captures`: the acquirer's listing of the window, in its order. `referenced`: our charges (any status)
// whose public id some capture names. `captured_in_window`: our captured charges whose capture may lie in
// the window (ReconciliationStore::FindCapturedInWindow).
WindowComparison CompareWindow(const std::vector<acquirer::Capture>& captures,
                               const std::vector<charges::Charge>& referenced,
                               const std::vector<charges::Charge>& captured_in_window);

// The differing fields of a capture and a charge that name each other ("" fields when they agree).
std::vector<std::string> DifferingFields(const acquirer::Capture& capture, const charges::Charge& charge);

// One discrepancy as it appears in the report.
boost::json::object DiscrepancyJson(const Discrepancy& discrepancy);

}  // namespace charge_outbox::reconciler
