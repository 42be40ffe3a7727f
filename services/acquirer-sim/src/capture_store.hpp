// Capture store: the acquirer's state and its idempotency rules, without HTTP.
//
// Idempotency keys are scoped by merchant (the credential that sent the request) and by operation: a
// capture key and a void key never collide. For captures:
//   unknown key                     -> the request proceeds; the key is marked in flight
//   in flight (first not finished)  -> kInFlight (HTTP 409)
//   finished, same request          -> the first outcome again, capture or decline (kReplay*)
//   finished or in flight, other request -> kMismatch (HTTP 422)
// A capture or decline becomes durable (RecordSink::Append) before the call that makes it returns, and
// only then is it visible in memory, so an answer is never given for a state the log does not have.
//
// The Stripe dialect (README.md, "Stripe dialect") keeps its PaymentIntents, refunds, events and stored
// answers in the same store, behind the same mutex and log: a succeeded PaymentIntent is also a Capture
// (marked `stripe`, invisible to our dialect's reads) so that /admin/ledger shows both dialects' money in
// one order. Its methods are implemented in stripe_store.cpp.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "capture_log.hpp"
#include "fault_profile.hpp"

namespace charge_outbox::acquirer_sim {

class Clock {
 public:
  virtual ~Clock() = default;
  virtual std::int64_t NowMicros() const = 0;  // Unix time
};

class SystemClock final : public Clock {
 public:
  std::int64_t NowMicros() const override;
};

using MerchantIndex = std::uint32_t;

struct Capture {
  std::string id;
  MerchantIndex merchant = 0;
  std::string idempotency_key;
  CaptureRequest request;
  std::int64_t created_at_us = 0;
  std::int64_t visible_at_us = 0;
  std::int64_t voided_at_us = 0;  // 0: not voided
  bool stripe = false;            // a Stripe PaymentIntent's capture: in the ledger only
};

// ---- The Stripe dialect's state ----

struct PaymentIntent {
  std::string id;  // pi_
  MerchantIndex merchant = 0;
  std::string idempotency_key;  // empty: created without one
  CaptureRequest request;       // currency upper-case, as in the ledger; reference = metadata[charge_id]
  std::string decline_code;     // empty: succeeded; else requires_payment_method with this decline
  std::string charge_id;        // ch_: its charge (declined ones have one too, as at Stripe)
  std::string event_id;         // payment_intent.succeeded or payment_intent.payment_failed
  std::string request_id;
  std::int64_t created_at_us = 0;
  std::int64_t visible_at_us = 0;     // retrieve and list (visibility_delay_ms)
  std::int64_t searchable_at_us = 0;  // search (search_lag_ms, and never before visible_at_us)
  // Its refund; refunded_at_us 0: not refunded.
  std::string refund_id;
  std::string refund_event_id;
  std::string refund_request_id;
  std::string refund_idempotency_key;
  std::int64_t refunded_at_us = 0;

  bool succeeded() const { return decline_code.empty(); }
};

// What a PaymentIntent create is asked to do, beyond the charge itself.
struct IntentOptions {
  std::optional<std::string> decline_code;  // set: decline
  std::int64_t visibility_delay_us = 0;
  std::int64_t search_lag_us = 0;
};

// An answer stored under a Stripe Idempotency-Key and replayed byte for byte.
struct StripeAnswer {
  unsigned status = 0;
  std::string body;
};

// Renders the answer to store (and give) from the state just made, under the store's lock, so that the
// state and its stored answer are one write to the log.
using IntentAnswer = std::function<StripeAnswer(const PaymentIntent&)>;

enum class StripeBeginOutcome { kProceed, kReplay, kInFlight, kMismatch };

struct StripeBegin {
  StripeBeginOutcome outcome = StripeBeginOutcome::kProceed;
  StripeAnswer answer;  // kReplay
};

enum class RefundOutcome { kRefunded, kNotFound, kNotSucceeded, kAlreadyRefunded, kAmountMismatch, kStorageFailed };

struct RefundResult {
  RefundOutcome outcome = RefundOutcome::kNotFound;
  std::optional<PaymentIntent> intent;
  StripeAnswer answer;  // kRefunded: what the renderer made
};

enum class StripeEventType { kPaymentIntentSucceeded, kPaymentIntentPaymentFailed, kChargeRefunded };
std::string_view ToString(StripeEventType type);

struct StripeEvent {
  std::string id;  // evt_
  StripeEventType type = StripeEventType::kPaymentIntentSucceeded;
  std::int64_t created_at_us = 0;
  std::string idempotency_key;  // of the request that caused it; empty: none
  std::string request_id;
  PaymentIntent intent;  // as it is now; the event's object is rendered from it as it was then
};

// Half-open [from_us, to_us), from Stripe's created[gte|gt|lt|lte] in seconds.
struct CreatedRange {
  std::int64_t from_us = std::numeric_limits<std::int64_t>::min();
  std::int64_t to_us = std::numeric_limits<std::int64_t>::max();
};

template <class T>
struct StripePage {
  std::vector<T> data;  // newest first
  bool has_more = false;
  bool unknown_cursor = false;  // starting_after names nothing of this merchant's
};

enum class BeginOutcome { kProceed, kReplayCaptured, kReplayDeclined, kInFlight, kMismatch };

struct BeginResult {
  BeginOutcome outcome = BeginOutcome::kProceed;
  std::optional<Capture> capture;  // kReplayCaptured
  std::string decline_code;        // kReplayDeclined
};

enum class CompleteOutcome { kCaptured, kDeclined, kStorageFailed };

struct CompleteResult {
  CompleteOutcome outcome = CompleteOutcome::kCaptured;
  std::string id;  // kCaptured
  std::int64_t created_at_us = 0;
};

enum class VoidOutcome { kVoided, kAlreadyVoided, kNotFound, kMismatch, kSettled, kStorageFailed };

struct VoidResult {
  VoidOutcome outcome = VoidOutcome::kNotFound;
  std::optional<Capture> capture;
};

struct ListPage {
  std::vector<Capture> captures;
  std::optional<std::uint64_t> next_cursor;  // position after the last capture returned, if more follow
};

struct LedgerEntry {
  RecordType type = RecordType::kCapture;  // kCapture or kVoid
  Capture capture;
  std::string idempotency_key;  // the capture's or the void's
  std::int64_t at_us = 0;       // when the capture or the void happened
};

// Thread-safe: one mutex around everything, held for map operations and one write(2); the caller does
// its waiting (latency faults) outside.
class CaptureStore {
 public:
  // `sink` and `clock` must outlive the store. `id_seed` seeds capture ids (0: from std::random_device).
  CaptureStore(RecordSink& sink, const Clock& clock, std::uint64_t id_seed = 0);

  // Registers a merchant id (say a hash of its credential) and returns its index; idempotent.
  MerchantIndex InternMerchant(std::string_view merchant_id);
  std::string MerchantId(MerchantIndex merchant) const;

  // Rebuilds state from a log record at start-up (no sink writes). Throws LogError if the record
  // contradicts the state (a void for a capture that does not exist).
  void Apply(const LogRecord& record);

  BeginResult BeginCapture(MerchantIndex merchant, std::string_view key, const CaptureRequest& request);
  // Finishes what BeginCapture(kProceed) started: a decline if `decline_code` is set, else a capture
  // visible to lookups `visibility_delay_us` after it is created. kStorageFailed releases the key.
  CompleteResult CompleteCapture(MerchantIndex merchant, std::string_view key, const CaptureRequest& request,
                                 const std::optional<std::string>& decline_code, std::int64_t visibility_delay_us);
  // Releases an in-flight key without an outcome (the request was cancelled); a retry starts afresh.
  void AbandonCapture(MerchantIndex merchant, std::string_view key);

  // Captures as a reader sees them: declined, in-flight and not-yet-visible ones are absent.
  std::optional<Capture> LookupByKey(MerchantIndex merchant, std::string_view key) const;
  std::optional<Capture> LookupById(MerchantIndex merchant, std::string_view id) const;
  // Visible captures with from_us <= created_at < to_us, after `cursor` (exclusive; 0 = from the start),
  // oldest first (created_at is strictly increasing in the store, so this order is total and stable).
  ListPage List(MerchantIndex merchant, std::int64_t from_us, std::int64_t to_us, std::uint64_t cursor,
                std::size_t limit) const;

  // Voids by capture id. A void key already used for this capture replays (kAlreadyVoided), for another
  // capture is kMismatch. Voiding an already voided capture with a new key is kAlreadyVoided too. A live
  // capture older than `void_window_us` (0: no window) has settled: kSettled, nothing written.
  VoidResult Void(MerchantIndex merchant, std::string_view void_key, std::string_view capture_id,
                  std::int64_t void_window_us = 0);

  // Every capture and void ever made, in the order they happened.
  std::vector<LedgerEntry> Ledger() const;
  std::size_t CaptureCount() const;
  // Captures begun and not yet completed or abandoned (waiting out a latency fault).
  std::size_t InFlightCount() const;

  // ---- Stripe dialect (stripe_store.cpp) ----

  // The idempotency layer. kProceed marks the key in flight: the request then ends in exactly one of
  // CreateIntent, Refund or StoreStripeAnswer with that key, or AbandonStripeKey. A key whose first use
  // is `retention_us` old or more is forgotten and proceeds as new. `params` is the request's canonical
  // form (route included); another request with the key is kMismatch.
  StripeBegin BeginStripeKey(MerchantIndex merchant, std::string_view key, std::string_view params,
                             std::int64_t retention_us);
  void AbandonStripeKey(MerchantIndex merchant, std::string_view key);
  // Stores an answer given without state (a 500 whose work was not done, a refund refused). False if it
  // could not be written (the key is then free).
  bool StoreStripeAnswer(MerchantIndex merchant, std::string_view key, const StripeAnswer& answer);

  // Creates a PaymentIntent (succeeded, or declined with options.decline_code) and, with a key, stores
  // `answer(intent)` under it in the same log write. std::nullopt: the log could not be written
  // (nothing made; the key is free).
  std::optional<std::pair<PaymentIntent, StripeAnswer>> CreateIntent(MerchantIndex merchant, std::string_view key,
                                                                     const CaptureRequest& request,
                                                                     const IntentOptions& options,
                                                                     const IntentAnswer& answer);
  // Refunds a succeeded PaymentIntent in full (`amount`, if given, must be its amount), storing
  // `answer(intent)` under the key with it. Nothing is written unless it is kRefunded.
  RefundResult Refund(MerchantIndex merchant, std::string_view key, std::string_view intent_id,
                      std::optional<std::int64_t> amount, const IntentAnswer& answer);

  // Reads, as they are now. Retrieve and list see what visibility_delay_ms lets them see; search also
  // waits out search_lag_ms; events are immediately consistent.
  std::optional<PaymentIntent> RetrieveIntent(MerchantIndex merchant, std::string_view id) const;
  // Every searchable PaymentIntent whose metadata[charge_id] is `charge_id`, newest first.
  std::vector<PaymentIntent> SearchIntents(MerchantIndex merchant, std::string_view charge_id) const;
  // Newest first (creation order, which created_at follows), strictly before `starting_after` if given.
  StripePage<PaymentIntent> ListIntents(MerchantIndex merchant, CreatedRange range,
                                        std::string_view starting_after, std::size_t limit) const;
  // `types` empty: every type.
  StripePage<StripeEvent> ListEvents(MerchantIndex merchant, const std::vector<StripeEventType>& types,
                                     CreatedRange range, std::string_view starting_after, std::size_t limit) const;

  // Forgets everything (merchants stay registered) and empties the log. False if the log could not be
  // emptied (memory is then left as it was).
  bool Reset();

 private:
  enum class KeyState : std::uint8_t { kInFlight, kCaptured, kDeclined };
  struct KeyEntry {
    KeyState state = KeyState::kInFlight;
    std::uint32_t capture = 0;  // kCaptured: index into captures_
    CaptureRequest request;     // kInFlight, kDeclined (a capture keeps its own)
    std::string decline_code;   // kDeclined
  };
  struct LedgerRef {
    RecordType type;
    std::uint32_t capture;
    std::int64_t at_us;
    std::string void_key;
  };

  struct StripeKeyEntry {
    bool in_flight = true;
    std::string params;
    std::int64_t first_used_us = 0;
    StripeAnswer answer;
  };
  struct EventRef {
    std::string id;
    StripeEventType type;
    std::uint32_t intent;  // index into intents_
    std::int64_t created_at_us;
  };

  static std::string ScopedKey(MerchantIndex merchant, std::string_view key);
  std::int64_t NextCreatedAt(std::int64_t now_us);
  std::string NewCaptureId();
  std::string NewId(std::string_view prefix);
  void ApplyStripe(MerchantIndex merchant, const LogRecord& record);
  void AddIntent(PaymentIntent intent);
  void AddRefund(std::uint32_t intent, std::string refund_id, std::string event_id, std::string request_id,
                 std::string key, std::int64_t at_us);
  void AddEvent(MerchantIndex merchant, std::string id, StripeEventType type, std::uint32_t intent,
                std::int64_t at_us);
  LogRecord AnswerRecord(MerchantIndex merchant, std::string_view key, const StripeKeyEntry& entry) const;
  // Writes `state` (if any) and, when `key` is in flight, `answer` stored under it, in one append; then
  // the key holds the answer. False if the log could not be written (the key is then free).
  bool AppendWithAnswer(MerchantIndex merchant, std::string_view key, const std::optional<LogRecord>& state,
                        const StripeAnswer& answer);
  std::uint32_t AddCapture(Capture capture);
  bool Visible(const Capture& capture, std::int64_t now_us) const;

  RecordSink& sink_;
  const Clock& clock_;
  mutable std::mutex mutex_;
  Prng id_prng_;
  std::vector<std::string> merchants_;
  std::unordered_map<std::string, KeyEntry> keys_;        // ScopedKey -> entry
  std::unordered_map<std::string, std::uint32_t> void_keys_;  // ScopedKey -> capture
  std::unordered_map<std::string, std::uint32_t> by_id_;  // capture id -> capture
  std::deque<Capture> captures_;                          // in creation order
  std::vector<std::vector<std::uint32_t>> by_merchant_;   // per merchant, in creation order
  std::vector<LedgerRef> ledger_;
  // Stripe dialect
  std::unordered_map<std::string, StripeKeyEntry> stripe_keys_;             // ScopedKey -> entry
  std::deque<PaymentIntent> intents_;                                       // in creation order
  std::unordered_map<std::string, std::uint32_t> intent_by_id_;             // pi id -> intents_
  std::unordered_map<std::string, std::vector<std::uint32_t>> by_charge_id_;  // ScopedKey(charge_id) -> intents_
  std::vector<std::vector<std::uint32_t>> intents_by_merchant_;             // creation order
  std::deque<EventRef> events_;                                             // in creation order
  std::unordered_map<std::string, std::uint32_t> event_by_id_;              // evt id -> events_
  std::vector<std::vector<std::uint32_t>> events_by_merchant_;              // indexes into events_
  std::size_t in_flight_ = 0;
  std::int64_t last_created_at_us_ = 0;
  std::string line_;  // reused encoding buffer
};

}  // namespace charge_outbox::acquirer_sim
