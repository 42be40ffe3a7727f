#include "capture_store.hpp"

#include <algorithm>
#include <chrono>
#include <random>

namespace charge_outbox::acquirer_sim {

std::int64_t SystemClock::NowMicros() const {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

CaptureStore::CaptureStore(RecordSink& sink, const Clock& clock, std::uint64_t id_seed)
    : sink_(sink),
      clock_(clock),
      id_prng_(id_seed != 0 ? id_seed : (std::uint64_t{std::random_device{}()} << 32) ^ std::random_device{}()) {}

MerchantIndex CaptureStore::InternMerchant(std::string_view merchant_id) {
  std::lock_guard lock(mutex_);
  for (std::size_t i = 0; i < merchants_.size(); ++i) {
    if (merchants_[i] == merchant_id) return static_cast<MerchantIndex>(i);
  }
  merchants_.emplace_back(merchant_id);
  by_merchant_.emplace_back();
  intents_by_merchant_.emplace_back();
  events_by_merchant_.emplace_back();
  return static_cast<MerchantIndex>(merchants_.size() - 1);
}

std::string CaptureStore::MerchantId(MerchantIndex merchant) const {
  std::lock_guard lock(mutex_);
  return merchants_.at(merchant);
}

std::string CaptureStore::ScopedKey(MerchantIndex merchant, std::string_view key) {
  std::string scoped;
  scoped.reserve(sizeof merchant + key.size());
  scoped.append(reinterpret_cast<const char*>(&merchant), sizeof merchant);
  scoped.append(key);
  return scoped;
}

std::int64_t CaptureStore::NextCreatedAt(std::int64_t now_us) {
  // Strictly increasing, so that creation order, created_at order and list order are one order even
  // when two captures land in the same microsecond or the wall clock steps back.
  last_created_at_us_ = std::max(now_us, last_created_at_us_ + 1);
  return last_created_at_us_;
}

std::string CaptureStore::NewId(std::string_view prefix) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string id(prefix);
  const std::uint64_t high = id_prng_.Next();
  const std::uint64_t low = id_prng_.Next();
  for (int shift = 60; shift >= 0; shift -= 4) id += kHex[(high >> shift) & 0xF];
  for (int shift = 28; shift >= 0; shift -= 4) id += kHex[(low >> shift) & 0xF];
  return id;
}

std::string CaptureStore::NewCaptureId() {
  for (;;) {
    std::string id = NewId("cap_");
    if (!by_id_.contains(id)) return id;
  }
}

std::uint32_t CaptureStore::AddCapture(Capture capture) {
  const auto index = static_cast<std::uint32_t>(captures_.size());
  by_id_.emplace(capture.id, index);
  if (!capture.stripe) by_merchant_.at(capture.merchant).push_back(index);
  ledger_.push_back({RecordType::kCapture, index, capture.created_at_us, {}});
  last_created_at_us_ = std::max(last_created_at_us_, capture.created_at_us);
  captures_.push_back(std::move(capture));
  return index;
}

bool CaptureStore::Visible(const Capture& capture, std::int64_t now_us) const {
  return now_us >= capture.visible_at_us;
}

void CaptureStore::Apply(const LogRecord& record) {
  const MerchantIndex merchant = InternMerchant(record.merchant);
  std::lock_guard lock(mutex_);
  switch (record.type) {
    case RecordType::kPaymentIntent:
    case RecordType::kRefund:
    case RecordType::kStripeAnswer:
      ApplyStripe(merchant, record);
      return;
    case RecordType::kCapture: {
      auto [it, inserted] = keys_.try_emplace(ScopedKey(merchant, record.idempotency_key));
      if (!inserted || by_id_.contains(record.id)) {
        throw LogError("a second capture for idempotency key \"" + record.idempotency_key + "\" or id " + record.id);
      }
      Capture capture{record.id, merchant, record.idempotency_key, record.request, record.created_at_us,
                      record.visible_at_us, 0};
      it->second.state = KeyState::kCaptured;
      it->second.capture = AddCapture(std::move(capture));
      return;
    }
    case RecordType::kDecline: {
      auto [it, inserted] = keys_.try_emplace(ScopedKey(merchant, record.idempotency_key));
      if (!inserted) throw LogError("a second outcome for idempotency key \"" + record.idempotency_key + "\"");
      it->second.state = KeyState::kDeclined;
      it->second.request = record.request;
      it->second.decline_code = record.decline_code;
      return;
    }
    case RecordType::kVoid: {
      const auto found = by_id_.find(record.id);
      if (found == by_id_.end() || captures_[found->second].merchant != merchant || captures_[found->second].stripe) {
        throw LogError("a void of capture " + record.id + ", which this merchant never made");
      }
      void_keys_.emplace(ScopedKey(merchant, record.idempotency_key), found->second);
      auto& capture = captures_[found->second];
      if (capture.voided_at_us == 0) {
        capture.voided_at_us = std::max<std::int64_t>(record.created_at_us, 1);
        ledger_.push_back({RecordType::kVoid, found->second, capture.voided_at_us, record.idempotency_key});
      }
      return;
    }
  }
}

BeginResult CaptureStore::BeginCapture(MerchantIndex merchant, std::string_view key, const CaptureRequest& request) {
  std::lock_guard lock(mutex_);
  auto [it, inserted] = keys_.try_emplace(ScopedKey(merchant, key));
  auto& entry = it->second;
  if (inserted) {
    entry.state = KeyState::kInFlight;
    entry.request = request;
    ++in_flight_;
    return {BeginOutcome::kProceed, std::nullopt, {}};
  }
  switch (entry.state) {
    case KeyState::kInFlight:
      return {entry.request == request ? BeginOutcome::kInFlight : BeginOutcome::kMismatch, std::nullopt, {}};
    case KeyState::kCaptured: {
      const auto& capture = captures_[entry.capture];
      if (capture.request != request) return {BeginOutcome::kMismatch, std::nullopt, {}};
      return {BeginOutcome::kReplayCaptured, capture, {}};
    }
    case KeyState::kDeclined:
      if (entry.request != request) return {BeginOutcome::kMismatch, std::nullopt, {}};
      return {BeginOutcome::kReplayDeclined, std::nullopt, entry.decline_code};
  }
  return {BeginOutcome::kMismatch, std::nullopt, {}};
}

CompleteResult CaptureStore::CompleteCapture(MerchantIndex merchant, std::string_view key,
                                             const CaptureRequest& request,
                                             const std::optional<std::string>& decline_code,
                                             std::int64_t visibility_delay_us) {
  std::lock_guard lock(mutex_);
  // Normally the entry is ours, in flight. A Reset while we waited removed it: we record our outcome
  // afresh, since the client will be told about it.
  auto [it, inserted] = keys_.try_emplace(ScopedKey(merchant, key));
  auto& entry = it->second;
  if (!inserted && entry.state == KeyState::kCaptured) {
    const auto& existing = captures_[entry.capture];
    return {CompleteOutcome::kCaptured, existing.id, existing.created_at_us};
  }
  if (!inserted && entry.state == KeyState::kDeclined) return {CompleteOutcome::kDeclined, {}, 0};
  if (!inserted) --in_flight_;  // ours, in flight until now
  const std::int64_t now = clock_.NowMicros();
  line_.clear();
  if (decline_code.has_value()) {
    AppendDeclineRecord(line_, merchants_[merchant], key, request, *decline_code, now);
    if (!sink_.Append(line_)) {
      keys_.erase(it);
      return {CompleteOutcome::kStorageFailed, {}, 0};
    }
    entry.state = KeyState::kDeclined;
    entry.request = request;
    entry.decline_code = *decline_code;
    return {CompleteOutcome::kDeclined, {}, 0};
  }
  const std::int64_t created = NextCreatedAt(now);
  // From the clock, not from `created`: created may run a few microseconds ahead of the clock (see
  // NextCreatedAt), and a capture without a visibility delay must be visible at once.
  const std::int64_t visible = now + visibility_delay_us;
  std::string id = NewCaptureId();
  AppendCaptureRecord(line_, merchants_[merchant], key, id, request, created, visible);
  if (!sink_.Append(line_)) {
    keys_.erase(it);
    return {CompleteOutcome::kStorageFailed, {}, 0};
  }
  Capture capture{id, merchant, std::string(key), request, created, visible, 0};
  entry.state = KeyState::kCaptured;
  entry.request = CaptureRequest{};  // the capture keeps it
  entry.capture = AddCapture(std::move(capture));
  return {CompleteOutcome::kCaptured, std::move(id), created};
}

void CaptureStore::AbandonCapture(MerchantIndex merchant, std::string_view key) {
  std::lock_guard lock(mutex_);
  const auto it = keys_.find(ScopedKey(merchant, key));
  if (it != keys_.end() && it->second.state == KeyState::kInFlight) {
    keys_.erase(it);
    --in_flight_;
  }
}

std::optional<Capture> CaptureStore::LookupByKey(MerchantIndex merchant, std::string_view key) const {
  const std::int64_t now = clock_.NowMicros();
  std::lock_guard lock(mutex_);
  const auto it = keys_.find(ScopedKey(merchant, key));
  if (it == keys_.end() || it->second.state != KeyState::kCaptured) return std::nullopt;
  const auto& capture = captures_[it->second.capture];
  if (!Visible(capture, now)) return std::nullopt;
  return capture;
}

std::optional<Capture> CaptureStore::LookupById(MerchantIndex merchant, std::string_view id) const {
  const std::int64_t now = clock_.NowMicros();
  std::lock_guard lock(mutex_);
  const auto it = by_id_.find(std::string(id));
  if (it == by_id_.end()) return std::nullopt;
  const auto& capture = captures_[it->second];
  if (capture.merchant != merchant || capture.stripe || !Visible(capture, now)) return std::nullopt;
  return capture;
}

ListPage CaptureStore::List(MerchantIndex merchant, std::int64_t from_us, std::int64_t to_us, std::uint64_t cursor,
                            std::size_t limit) const {
  const std::int64_t now = clock_.NowMicros();
  ListPage page;
  std::lock_guard lock(mutex_);
  if (merchant >= by_merchant_.size() || limit == 0) return page;
  const auto& mine = by_merchant_[merchant];
  // Both conditions hold for a prefix of `mine` (ids and created_at grow along it), so their union does.
  auto it = std::partition_point(mine.begin(), mine.end(), [&](std::uint32_t index) {
    return captures_[index].created_at_us < from_us || index < cursor;
  });
  std::uint32_t last = 0;
  for (; it != mine.end(); ++it) {
    const auto& capture = captures_[*it];
    if (capture.created_at_us >= to_us) break;
    if (!Visible(capture, now)) continue;
    if (page.captures.size() == limit) {
      page.next_cursor = std::uint64_t{last} + 1;
      break;
    }
    page.captures.push_back(capture);
    last = *it;
  }
  return page;
}

VoidResult CaptureStore::Void(MerchantIndex merchant, std::string_view void_key, std::string_view capture_id,
                              std::int64_t void_window_us) {
  std::lock_guard lock(mutex_);
  const auto found = by_id_.find(std::string(capture_id));
  if (found == by_id_.end() || captures_[found->second].merchant != merchant || captures_[found->second].stripe) {
    return {VoidOutcome::kNotFound, {}};
  }
  const std::uint32_t index = found->second;
  auto scoped = ScopedKey(merchant, void_key);
  if (const auto used = void_keys_.find(scoped); used != void_keys_.end()) {
    if (used->second != index) return {VoidOutcome::kMismatch, std::nullopt};
    return {VoidOutcome::kAlreadyVoided, captures_[index]};
  }
  const std::int64_t now = std::max<std::int64_t>(clock_.NowMicros(), 1);
  if (const auto& live = captures_[index];
      void_window_us > 0 && live.voided_at_us == 0 && now - live.created_at_us > void_window_us) {
    return {VoidOutcome::kSettled, std::nullopt};
  }
  line_.clear();
  AppendVoidRecord(line_, merchants_[merchant], void_key, capture_id, now);
  if (!sink_.Append(line_)) return {VoidOutcome::kStorageFailed, std::nullopt};
  void_keys_.emplace(std::move(scoped), index);
  auto& capture = captures_[index];
  if (capture.voided_at_us != 0) return {VoidOutcome::kAlreadyVoided, capture};
  capture.voided_at_us = now;
  ledger_.push_back({RecordType::kVoid, index, now, std::string(void_key)});
  return {VoidOutcome::kVoided, capture};
}

std::vector<LedgerEntry> CaptureStore::Ledger() const {
  std::lock_guard lock(mutex_);
  std::vector<LedgerEntry> entries;
  entries.reserve(ledger_.size());
  for (const auto& ref : ledger_) {
    const auto& capture = captures_[ref.capture];
    entries.push_back(
        {ref.type, capture, ref.type == RecordType::kVoid ? ref.void_key : capture.idempotency_key, ref.at_us});
  }
  return entries;
}

std::size_t CaptureStore::CaptureCount() const {
  std::lock_guard lock(mutex_);
  return captures_.size();
}

std::size_t CaptureStore::InFlightCount() const {
  std::lock_guard lock(mutex_);
  return in_flight_;
}

bool CaptureStore::Reset() {
  std::lock_guard lock(mutex_);
  if (!sink_.Truncate()) return false;
  keys_.clear();
  void_keys_.clear();
  by_id_.clear();
  captures_.clear();
  for (auto& list : by_merchant_) list.clear();
  ledger_.clear();
  stripe_keys_.clear();
  intents_.clear();
  intent_by_id_.clear();
  by_charge_id_.clear();
  for (auto& list : intents_by_merchant_) list.clear();
  events_.clear();
  event_by_id_.clear();
  for (auto& list : events_by_merchant_) list.clear();
  in_flight_ = 0;  // their requests complete into the emptied store
  return true;
}

}  // namespace charge_outbox::acquirer_sim
