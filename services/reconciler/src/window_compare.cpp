#include "window_compare.hpp"

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

std::optional<UuidKey> UuidKeyOf(std::string_view uuid) {
  UuidKey key{};
  std::size_t n = 0;
  int high = -1;
  for (const char c : uuid) {
    if (c == '-') continue;
    int v = -1;
    if (c >= '0' && c <= '9') v = c - '0';
    else if (c >= 'a' && c <= 'f') v = c - 'a' + 10;
    else if (c >= 'A' && c <= 'F') v = c - 'A' + 10;
    if (v < 0 || n == key.size()) return std::nullopt;
    if (high < 0) {
      high = v;
    } else {
      key[n++] = static_cast<std::uint8_t>(high * 16 + v);
      high = -1;
    }
  }
  if (n != key.size() || high >= 0) return std::nullopt;
  return key;
}

std::size_t UuidKeyHash::operator()(const UuidKey& key) const noexcept {
  // Our uuids are random (v4): any eight of their bytes are a hash already.
  std::uint64_t h = 0;
  for (std::size_t i = 0; i < 8; ++i) h = (h << 8) | key[8 + i];
  return static_cast<std::size_t>(h);
}

namespace {
constexpr std::uint8_t kJudged = 1;          // the charge's genuine capture has been compared
constexpr std::uint8_t kRecordedListed = 2;  // the capture the charge recorded has been listed
}  // namespace

void WindowComparer::Judge(const acquirer::Capture& capture, const charges::Charge& charge,
                           std::vector<Discrepancy>& out) {
  auto fields = DifferingFields(capture, charge);
  if (!fields.empty()) {
    out.push_back({DiscrepancyKind::kMismatch, capture, charge, std::move(fields)});
  } else if (charge.status == ChargeStatus::kPending) {
    ++pending_with_capture_;
  } else {
    ++matched_;
  }
}

std::vector<Discrepancy> WindowComparer::ComparePage(const std::vector<acquirer::Capture>& page,
                                                     const std::vector<charges::Charge>& referenced) {
  std::unordered_map<std::string, const charges::Charge*> by_public_id;
  for (const auto& c : referenced) by_public_id[c.public_id()] = &c;
  std::vector<Discrepancy> out;
  for (const auto& capture : page) {
    const auto found = by_public_id.find(capture.reference);
    const auto key = found == by_public_id.end() ? std::nullopt : UuidKeyOf(found->second->id);
    if (!key) {
      out.push_back({DiscrepancyKind::kCaptureWithoutLocalRecord, capture, std::nullopt, {}});
      continue;
    }
    const auto& charge = *found->second;
    auto& seen = listed_[*key];
    const auto duplicate = [&] { out.push_back({DiscrepancyKind::kDuplicateCapture, capture, charge, {}}); };
    if (!charge.acquirer_capture_id) {
      if ((seen & kJudged) != 0) {
        duplicate();
      } else {
        seen |= kJudged;
        Judge(capture, charge, out);
      }
      continue;
    }
    if (capture.id == *charge.acquirer_capture_id && (seen & kRecordedListed) == 0) {
      seen |= kJudged | kRecordedListed;
      Judge(capture, charge, out);
      if (const auto waited = waiting_.find(*key); waited != waiting_.end()) {
        out.push_back({DiscrepancyKind::kDuplicateCapture, std::move(waited->second.capture), charge, {}});
        waiting_.erase(waited);
      }
    } else if ((seen & kRecordedListed) != 0 || waiting_.contains(*key)) {
      duplicate();
    } else {
      waiting_.emplace(*key, Waiting{capture, charge});
    }
  }
  return out;
}

std::vector<Discrepancy> WindowComparer::Finish() {
  std::vector<Discrepancy> out;
  for (auto& [key, waited] : waiting_) {
    listed_[key] |= kJudged;
    Judge(waited.capture, waited.charge, out);
  }
  waiting_.clear();
  return out;
}

bool WindowComparer::Listed(std::string_view uuid) const {
  const auto key = UuidKeyOf(uuid);
  return key && listed_.contains(*key);
}

WindowComparison CompareWindow(const std::vector<acquirer::Capture>& captures,
                               const std::vector<charges::Charge>& referenced,
                               const std::vector<charges::Charge>& captured_in_window) {
  WindowComparer comparer;
  WindowComparison out;
  out.discrepancies = comparer.ComparePage(captures, referenced);
  for (auto& d : comparer.Finish()) out.discrepancies.push_back(std::move(d));
  for (const auto& charge : captured_in_window) {
    if (!comparer.Listed(charge.id)) out.unlisted.push_back(charge);
  }
  out.matched = comparer.matched();
  out.pending_with_capture = comparer.pending_with_capture();
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
  return o;
}

}  // namespace charge_outbox::reconciler
