// CaptureStore's Stripe half: PaymentIntents, refunds, events and the answers stored under Stripe
// Idempotency-Keys (the rules are in capture_store.hpp and README.md, "Stripe dialect").
#include <algorithm>

#include "capture_store.hpp"

namespace charge_outbox::acquirer_sim {
namespace {

// Positions in a merchant's list (indexes into the store's deque, ascending) newest first: from just
// below `end` down to the first whose time is at least range.from_us.
template <class Index, class Item, class Accept, class Emit>
void WalkNewestFirst(const std::vector<Index>& mine, std::size_t end, const Item& items, CreatedRange range,
                     Accept accept, Emit emit) {
  // created_at grows along `mine`, so the ones before range.to_us are a prefix.
  const auto upper = std::partition_point(mine.begin(), mine.begin() + static_cast<std::ptrdiff_t>(end),
                                          [&](Index i) { return items[i].created_at_us < range.to_us; });
  for (auto it = upper; it != mine.begin();) {
    --it;
    const auto& item = items[*it];
    if (item.created_at_us < range.from_us) return;
    if (!accept(item)) continue;
    if (!emit(*it)) return;
  }
}

// A PaymentIntent as its log record describes it (refunds come in records of their own).
PaymentIntent IntentFrom(const LogRecord& record, MerchantIndex merchant) {
  PaymentIntent intent;
  intent.id = record.id;
  intent.merchant = merchant;
  intent.idempotency_key = record.idempotency_key;
  intent.request = record.request;
  intent.decline_code = record.decline_code;
  intent.charge_id = record.charge_id;
  intent.event_id = record.event_id;
  intent.request_id = record.request_id;
  intent.created_at_us = record.created_at_us;
  intent.visible_at_us = record.visible_at_us;
  intent.searchable_at_us = record.searchable_at_us;
  return intent;
}

}  // namespace

std::string_view ToString(StripeEventType type) {
  switch (type) {
    case StripeEventType::kPaymentIntentSucceeded: return "payment_intent.succeeded";
    case StripeEventType::kPaymentIntentPaymentFailed: return "payment_intent.payment_failed";
    case StripeEventType::kChargeRefunded: return "charge.refunded";
  }
  return "?";
}

void CaptureStore::AddEvent(MerchantIndex merchant, std::string id, StripeEventType type, std::uint32_t intent,
                            std::int64_t at_us) {
  const auto index = static_cast<std::uint32_t>(events_.size());
  event_by_id_.emplace(id, index);
  events_by_merchant_.at(merchant).push_back(index);
  events_.push_back({std::move(id), type, intent, at_us});
}

void CaptureStore::AddIntent(PaymentIntent intent) {
  const auto index = static_cast<std::uint32_t>(intents_.size());
  if (intent.succeeded()) {
    Capture capture{intent.id, intent.merchant, intent.idempotency_key, intent.request, intent.created_at_us,
                    intent.visible_at_us, 0, true};
    AddCapture(std::move(capture));
  } else {
    last_created_at_us_ = std::max(last_created_at_us_, intent.created_at_us);
  }
  intent_by_id_.emplace(intent.id, index);
  by_charge_id_[ScopedKey(intent.merchant, intent.request.reference)].push_back(index);
  intents_by_merchant_.at(intent.merchant).push_back(index);
  AddEvent(intent.merchant, intent.event_id,
           intent.succeeded() ? StripeEventType::kPaymentIntentSucceeded : StripeEventType::kPaymentIntentPaymentFailed,
           index, intent.created_at_us);
  intents_.push_back(std::move(intent));
}

void CaptureStore::AddRefund(std::uint32_t index, std::string refund_id, std::string event_id, std::string request_id,
                             std::string key, std::int64_t at_us) {
  auto& intent = intents_[index];
  intent.refund_id = std::move(refund_id);
  intent.refund_event_id = event_id;
  intent.refund_request_id = std::move(request_id);
  intent.refund_idempotency_key = key;
  intent.refunded_at_us = at_us;
  const auto capture = by_id_.at(intent.id);
  captures_[capture].voided_at_us = at_us;
  ledger_.push_back({RecordType::kVoid, capture, at_us, std::move(key)});
  last_created_at_us_ = std::max(last_created_at_us_, at_us);
  AddEvent(intent.merchant, std::move(event_id), StripeEventType::kChargeRefunded, index, at_us);
}

void CaptureStore::ApplyStripe(MerchantIndex merchant, const LogRecord& record) {
  switch (record.type) {
    case RecordType::kPaymentIntent: {
      if (intent_by_id_.contains(record.id) || by_id_.contains(record.id)) {
        throw LogError("a second PaymentIntent " + record.id);
      }
      PaymentIntent intent = IntentFrom(record, merchant);
      AddIntent(std::move(intent));
      return;
    }
    case RecordType::kRefund: {
      const auto found = intent_by_id_.find(record.id);
      if (found == intent_by_id_.end() || intents_[found->second].merchant != merchant ||
          !intents_[found->second].succeeded() || intents_[found->second].refunded_at_us != 0) {
        throw LogError("a refund of PaymentIntent " + record.id +
                       ", which is not this merchant's, not succeeded, or already refunded");
      }
      AddRefund(found->second, record.refund_id, record.event_id, record.request_id, record.idempotency_key,
                std::max<std::int64_t>(record.created_at_us, 1));
      return;
    }
    case RecordType::kStripeAnswer: {
      // A later answer for the same key is the key used again after it was pruned: it replaces the first.
      auto& entry = stripe_keys_[ScopedKey(merchant, record.idempotency_key)];
      entry.in_flight = false;
      entry.params = record.params;
      entry.first_used_us = record.created_at_us;
      entry.answer = {static_cast<unsigned>(record.status), record.body};
      return;
    }
    case RecordType::kCapture:
    case RecordType::kDecline:
    case RecordType::kVoid:
      return;  // our dialect's: Apply handles them
  }
}

StripeBegin CaptureStore::BeginStripeKey(MerchantIndex merchant, std::string_view key, std::string_view params,
                                         std::int64_t retention_us) {
  const std::int64_t now = clock_.NowMicros();
  std::lock_guard lock(mutex_);
  auto [it, inserted] = stripe_keys_.try_emplace(ScopedKey(merchant, key));
  auto& entry = it->second;
  if (!inserted && !entry.in_flight && now - entry.first_used_us >= retention_us) {
    inserted = true;  // pruned: the key is new again
  }
  if (inserted) {
    entry = StripeKeyEntry{true, std::string(params), now, {}};
    ++in_flight_;
    return {StripeBeginOutcome::kProceed, {}};
  }
  if (entry.params != params) return {StripeBeginOutcome::kMismatch, {}};
  if (entry.in_flight) return {StripeBeginOutcome::kInFlight, {}};
  return {StripeBeginOutcome::kReplay, entry.answer};
}

void CaptureStore::AbandonStripeKey(MerchantIndex merchant, std::string_view key) {
  std::lock_guard lock(mutex_);
  const auto it = stripe_keys_.find(ScopedKey(merchant, key));
  if (it != stripe_keys_.end() && it->second.in_flight) {
    stripe_keys_.erase(it);
    --in_flight_;
  }
}

LogRecord CaptureStore::AnswerRecord(MerchantIndex merchant, std::string_view key, const StripeKeyEntry& entry) const {
  LogRecord record;
  record.type = RecordType::kStripeAnswer;
  record.merchant = merchants_[merchant];
  record.idempotency_key = key;
  record.params = entry.params;
  record.status = entry.answer.status;
  record.body = entry.answer.body;
  record.created_at_us = entry.first_used_us;
  return record;
}

bool CaptureStore::StoreStripeAnswer(MerchantIndex merchant, std::string_view key, const StripeAnswer& answer) {
  std::lock_guard lock(mutex_);
  return AppendWithAnswer(merchant, key, std::nullopt, answer);
}

bool CaptureStore::AppendWithAnswer(MerchantIndex merchant, std::string_view key,
                                    const std::optional<LogRecord>& state, const StripeAnswer& answer) {
  line_.clear();
  if (state) EncodeRecord(*state, line_);
  // No key, or a Reset while the request ran: there is no key to store the answer under.
  const auto entry = key.empty() ? stripe_keys_.end() : stripe_keys_.find(ScopedKey(merchant, key));
  const bool store_answer = entry != stripe_keys_.end() && entry->second.in_flight;
  if (store_answer) {
    StripeKeyEntry stored = entry->second;
    stored.answer = answer;
    EncodeRecord(AnswerRecord(merchant, key, stored), line_);
  }
  if (line_.empty()) return true;
  if (!sink_.Append(line_)) {
    if (store_answer) {
      stripe_keys_.erase(entry);
      --in_flight_;
    }
    return false;
  }
  if (store_answer) {
    --in_flight_;
    entry->second.in_flight = false;
    entry->second.answer = answer;
  }
  return true;
}

std::optional<std::pair<PaymentIntent, StripeAnswer>> CaptureStore::CreateIntent(MerchantIndex merchant,
                                                                                 std::string_view key,
                                                                                 const CaptureRequest& request,
                                                                                 const IntentOptions& options,
                                                                                 const IntentAnswer& answer) {
  std::lock_guard lock(mutex_);
  const std::int64_t now = clock_.NowMicros();
  LogRecord record;
  record.type = RecordType::kPaymentIntent;
  record.merchant = merchants_[merchant];
  record.idempotency_key = key;
  do {
    record.id = NewId("pi_");
  } while (by_id_.contains(record.id) || intent_by_id_.contains(record.id));
  record.request = request;
  record.decline_code = options.decline_code.value_or("");
  record.charge_id = NewId("ch_");
  record.event_id = NewId("evt_");
  record.request_id = NewId("req_");
  record.created_at_us = NextCreatedAt(now);
  record.visible_at_us = now + options.visibility_delay_us;
  record.searchable_at_us = std::max(record.visible_at_us, now + options.search_lag_us);
  PaymentIntent intent = IntentFrom(record, merchant);
  StripeAnswer given = answer(intent);
  if (!AppendWithAnswer(merchant, key, record, given)) return std::nullopt;
  AddIntent(intent);
  return std::pair{std::move(intent), std::move(given)};
}

RefundResult CaptureStore::Refund(MerchantIndex merchant, std::string_view key, std::string_view intent_id,
                                  std::optional<std::int64_t> amount, const IntentAnswer& answer) {
  std::lock_guard lock(mutex_);
  const auto found = intent_by_id_.find(std::string(intent_id));
  if (found == intent_by_id_.end() || intents_[found->second].merchant != merchant) return {RefundOutcome::kNotFound};
  const std::uint32_t index = found->second;
  const PaymentIntent& current = intents_[index];
  if (!current.succeeded()) return {RefundOutcome::kNotSucceeded, current, {}};
  if (current.refunded_at_us != 0) return {RefundOutcome::kAlreadyRefunded, current, {}};
  if (amount && *amount != current.request.amount) return {RefundOutcome::kAmountMismatch, current, {}};

  const std::int64_t at = NextCreatedAt(clock_.NowMicros());
  PaymentIntent refunded = current;
  refunded.refund_id = NewId("re_");
  refunded.refund_event_id = NewId("evt_");
  refunded.refund_request_id = NewId("req_");
  refunded.refund_idempotency_key = key;
  refunded.refunded_at_us = at;
  LogRecord record;
  record.type = RecordType::kRefund;
  record.merchant = merchants_[merchant];
  record.idempotency_key = key;
  record.id = refunded.id;
  record.refund_id = refunded.refund_id;
  record.event_id = refunded.refund_event_id;
  record.request_id = refunded.refund_request_id;
  record.created_at_us = at;
  StripeAnswer given = answer(refunded);
  if (!AppendWithAnswer(merchant, key, record, given)) return {RefundOutcome::kStorageFailed};
  AddRefund(index, refunded.refund_id, refunded.refund_event_id, refunded.refund_request_id, std::string(key), at);
  return {RefundOutcome::kRefunded, std::move(refunded), std::move(given)};
}

std::optional<PaymentIntent> CaptureStore::RetrieveIntent(MerchantIndex merchant, std::string_view id) const {
  const std::int64_t now = clock_.NowMicros();
  std::lock_guard lock(mutex_);
  const auto found = intent_by_id_.find(std::string(id));
  if (found == intent_by_id_.end()) return std::nullopt;
  const auto& intent = intents_[found->second];
  if (intent.merchant != merchant || now < intent.visible_at_us) return std::nullopt;
  return intent;
}

std::vector<PaymentIntent> CaptureStore::SearchIntents(MerchantIndex merchant, std::string_view charge_id) const {
  const std::int64_t now = clock_.NowMicros();
  std::vector<PaymentIntent> found;
  std::lock_guard lock(mutex_);
  const auto it = by_charge_id_.find(ScopedKey(merchant, charge_id));
  if (it == by_charge_id_.end()) return found;
  for (auto index = it->second.rbegin(); index != it->second.rend(); ++index) {
    if (now >= intents_[*index].searchable_at_us) found.push_back(intents_[*index]);
  }
  return found;
}

StripePage<PaymentIntent> CaptureStore::ListIntents(MerchantIndex merchant, CreatedRange range,
                                                    std::string_view starting_after, std::size_t limit) const {
  const std::int64_t now = clock_.NowMicros();
  StripePage<PaymentIntent> page;
  std::lock_guard lock(mutex_);
  if (merchant >= intents_by_merchant_.size()) return page;
  const auto& mine = intents_by_merchant_[merchant];
  std::size_t end = mine.size();
  if (!starting_after.empty()) {
    const auto cursor = intent_by_id_.find(std::string(starting_after));
    if (cursor == intent_by_id_.end() || intents_[cursor->second].merchant != merchant) {
      page.unknown_cursor = true;
      return page;
    }
    end = static_cast<std::size_t>(std::lower_bound(mine.begin(), mine.end(), cursor->second) - mine.begin());
  }
  WalkNewestFirst(
      mine, end, intents_, range, [&](const PaymentIntent& intent) { return now >= intent.visible_at_us; },
      [&](std::uint32_t index) {
        if (page.data.size() == limit) {
          page.has_more = true;
          return false;
        }
        page.data.push_back(intents_[index]);
        return true;
      });
  return page;
}

StripePage<StripeEvent> CaptureStore::ListEvents(MerchantIndex merchant, const std::vector<StripeEventType>& types,
                                                 CreatedRange range, std::string_view starting_after,
                                                 std::size_t limit) const {
  StripePage<StripeEvent> page;
  std::lock_guard lock(mutex_);
  if (merchant >= events_by_merchant_.size()) return page;
  const auto& mine = events_by_merchant_[merchant];
  std::size_t end = mine.size();
  if (!starting_after.empty()) {
    const auto cursor = event_by_id_.find(std::string(starting_after));
    if (cursor == event_by_id_.end() || intents_[events_[cursor->second].intent].merchant != merchant) {
      page.unknown_cursor = true;
      return page;
    }
    end = static_cast<std::size_t>(std::lower_bound(mine.begin(), mine.end(), cursor->second) - mine.begin());
  }
  WalkNewestFirst(
      mine, end, events_, range,
      [&](const EventRef& event) { return types.empty() || std::ranges::find(types, event.type) != types.end(); },
      [&](std::uint32_t index) {
        if (page.data.size() == limit) {
          page.has_more = true;
          return false;
        }
        const auto& ref = events_[index];
        const auto& intent = intents_[ref.intent];
        const bool refund = ref.type == StripeEventType::kChargeRefunded;
        page.data.push_back({ref.id, ref.type, ref.created_at_us,
                             refund ? intent.refund_idempotency_key : intent.idempotency_key,
                             refund ? intent.refund_request_id : intent.request_id, intent});
        return true;
      });
  return page;
}

}  // namespace charge_outbox::acquirer_sim
