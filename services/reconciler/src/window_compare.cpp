#include "window_compare.hpp"

#include <map>
#include <set>

#include "charge_outbox/util/time.hpp"

namespace charge_outbox::reconciler {
namespace {

namespace json = boost::json;
using charges::ChargeStatus;

// Whether our status contradicts the capture's. A pending charge is not a contradiction (the sweep
// resolves it from the same capture), and one already in review is already with a human.
bool StatusContradicts(acquirer::CaptureStatus remote, ChargeStatus local) {
  switch (local) {
    case ChargeStatus::kPending:
    case ChargeStatus::kNeedsReview: return false;
    case ChargeStatus::kCaptured: return remote != acquirer::CaptureStatus::kCaptured;
    case ChargeStatus::kCanceled: return remote != acquirer::CaptureStatus::kVoided;
    case ChargeStatus::kFailed: return true;  // a failed charge has no capture, voided or not
  }
  return true;
}

json::object CaptureJson(const acquirer::Capture& c) {
  json::object o;
  o["id"] = c.id;
  o["status"] = acquirer::ToString(c.status);
  o["amount"] = c.amount;
  o["currency"] = c.currency;
  o["reference"] = c.reference;
  o["created_at"] = c.created_at;
  if (c.idempotency_key) o["idempotency_key"] = *c.idempotency_key;
  return o;
}

json::object ChargeJson(const charges::Charge& c) {
  json::object o;
  o["id"] = c.public_id();
  o["merchant_id"] = c.merchant_id;
  o["status"] = charges::ToString(c.status);
  o["amount"] = c.amount;
  o["currency"] = c.currency;
  o["acquirer_idempotency_key"] = charges::AcquirerIdempotencyKey(c);
  if (c.acquirer_capture_id) o["acquirer_capture_id"] = *c.acquirer_capture_id;
  o["created_at"] = util::FormatRfc3339(c.created_at);
  o["updated_at"] = util::FormatRfc3339(c.updated_at);
  return o;
}

}  // namespace

std::string_view ToString(DiscrepancyKind kind) {
  switch (kind) {
    case DiscrepancyKind::kCaptureWithoutLocalRecord: return "capture_without_local_record";
    case DiscrepancyKind::kMissingAtAcquirer: return "missing_at_acquirer";
    case DiscrepancyKind::kMismatch: return "mismatch";
    case DiscrepancyKind::kDuplicateCapture: return "duplicate_capture";
  }
  return "?";
}

std::vector<std::string> DifferingFields(const acquirer::Capture& capture, const charges::Charge& charge) {
  std::vector<std::string> fields;
  if (capture.amount != charge.amount) fields.emplace_back("amount");
  if (capture.currency != charge.currency) fields.emplace_back("currency");
  if (StatusContradicts(capture.status, charge.status)) fields.emplace_back("status");
  if (charge.acquirer_capture_id && *charge.acquirer_capture_id != capture.id) fields.emplace_back("capture_id");
  if (capture.idempotency_key && *capture.idempotency_key != charges::AcquirerIdempotencyKey(charge)) {
    fields.emplace_back("idempotency_key");
  }
  return fields;
}

WindowComparison CompareWindow(const std::vector<acquirer::Capture>& captures,
                               const std::vector<charges::Charge>& referenced,
                               const std::vector<charges::Charge>& captured_in_window) {
  WindowComparison out;
  std::map<std::string, const charges::Charge*> by_public_id;
  for (const auto& c : referenced) by_public_id[c.public_id()] = &c;

  // Captures grouped by the charge they name, in listing order (std::map keeps one entry per reference;
  // the vector keeps the acquirer's order inside it).
  std::vector<std::string> order;
  std::map<std::string, std::vector<const acquirer::Capture*>> by_reference;
  for (const auto& capture : captures) {
    auto& group = by_reference[capture.reference];
    if (group.empty()) order.push_back(capture.reference);
    group.push_back(&capture);
  }

  for (const auto& reference : order) {
    const auto& group = by_reference[reference];
    const auto found = by_public_id.find(reference);
    if (found == by_public_id.end()) {
      for (const auto* capture : group) {
        out.discrepancies.push_back({DiscrepancyKind::kCaptureWithoutLocalRecord, *capture, std::nullopt, {}, false});
      }
      continue;
    }
    const auto& charge = *found->second;
    // The capture our charge recorded is the genuine one; without a record, the first the acquirer made.
    const acquirer::Capture* primary = group.front();
    if (charge.acquirer_capture_id) {
      for (const auto* capture : group) {
        if (capture->id == *charge.acquirer_capture_id) primary = capture;
      }
    }
    for (const auto* capture : group) {
      if (capture != primary) {
        out.discrepancies.push_back({DiscrepancyKind::kDuplicateCapture, *capture, charge, {}, false});
      }
    }
    auto fields = DifferingFields(*primary, charge);
    if (!fields.empty()) {
      out.discrepancies.push_back({DiscrepancyKind::kMismatch, *primary, charge, std::move(fields), false});
    } else if (charge.status == ChargeStatus::kPending) {
      ++out.pending_with_capture;
    } else {
      ++out.matched;
    }
  }

  for (const auto& charge : captured_in_window) {
    if (!by_reference.contains(charge.public_id())) out.unlisted.push_back(charge);
  }
  return out;
}

json::object DiscrepancyJson(const Discrepancy& d) {
  json::object o;
  o["kind"] = ToString(d.kind);
  if (d.charge) {
    o["charge_id"] = d.charge->public_id();
  } else if (d.capture) {
    o["reference"] = d.capture->reference;
  }
  if (!d.fields.empty()) {
    json::array fields;
    for (const auto& f : d.fields) fields.emplace_back(f);
    o["fields"] = std::move(fields);
  }
  if (d.charge) o["local"] = ChargeJson(*d.charge);
  if (d.capture) o["acquirer"] = CaptureJson(*d.capture);
  o["flagged"] = d.flagged;
  if (d.recorded) o["recorded"] = *d.recorded;
  return o;
}

}  // namespace charge_outbox::reconciler
