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
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
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

  static std::string ScopedKey(MerchantIndex merchant, std::string_view key);
  std::int64_t NextCreatedAt(std::int64_t now_us);
  std::string NewCaptureId();
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
  std::size_t in_flight_ = 0;
  std::int64_t last_created_at_us_ = 0;
  std::string line_;  // reused encoding buffer
};

}  // namespace charge_outbox::acquirer_sim
