// OrphanCaptureStore: captures the acquirer holds that no charge of ours names (the window report's
// `capture_without_local_record`), kept until a person settles each one: voided at the acquirer, or
// adopted, that is, the charge whose record was lost written back `captured` with its events. The window
// report records them; charge-admin lists, voids and adopts them, each change with its audit row
// (`operator_actions`) in the same statement.
//
// It owns `orphan_captures` (0014). An adoption also inserts the charge and its outbox events, with the
// codec the charge stores share.
//
// Thread safety: every method may be called concurrently; each runs on a pooled connection.
#pragma once

#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "charge_outbox/acquirer/model.hpp"
#include "charge_outbox/charges/charge.hpp"
#include "charge_outbox/charges/review_store.hpp"
#include "charge_outbox/db/database.hpp"

namespace charge_outbox::charges {

enum class OrphanStatus {
  kOpen,     // for a person
  kVoided,   // a person's void was confirmed by the acquirer
  kAdopted,  // written back as a charge of ours (adopted_charge_id)
};
std::string_view ToString(OrphanStatus status);

struct OrphanCapture {
  acquirer::Capture capture;  // as the acquirer last listed it (its status too)
  std::string window_from, window_to;      // the window of the report that first found it (RFC 3339)
  std::string first_seen_at, last_seen_at;  // when reports found it
  OrphanStatus status = OrphanStatus::kOpen;
  int voids_recorded = 0;                     // voids a person asked for, counted before each was sent
  std::optional<std::string> last_void_outcome;  // the latest void's answer (an OutcomeKind name); unset: none yet
  std::optional<int> last_void_http_status;
  std::optional<std::string> adopted_charge_id;  // public id
  std::optional<std::string> resolved_by, resolved_at;
};

// The answer of a void a person asked for, to record.
struct OrphanVoid {
  std::string capture_id;
  acquirer::OutcomeKind outcome = acquirer::OutcomeKind::kNotSent;
  std::optional<int> http_status;
  std::string operator_name, reason;
  std::string acquirer_said;  // in words, for the audit row
};

// A capture whose charge's record was lost, written back as that charge: `captured`, with its
// `initiated` (sequence 1) and `captured` (sequence 2) events, as charge-api would have written them.
struct Adoption {
  std::string capture_id;
  std::string charge_id;        // uuid: the one the capture's reference names
  std::string merchant_id;      // uuid: the one the capture's key names
  std::string idempotency_key;  // the client's key: the capture's key without the merchant
  std::string order_id;         // the merchant's order the money paid for (the person says which)
  int voids_seen = 0;           // voids_recorded as the person read it
  std::string operator_name, reason;
  std::string acquirer_said;
};

struct AdoptResult {
  enum class Outcome {
    kAdopted,         // the charge, its events, the orphan's status and the audit row, together
    kOrphanChanged,   // not open any more, or a void was recorded since it was read: see `orphan`
    kNoSuchMerchant,  // nothing changed
    kChargeExists,    // a charge of ours holds the id or the merchant's key: see `charge`
  };
  Outcome outcome = Outcome::kOrphanChanged;
  std::optional<Charge> charge;
  std::optional<OrphanCapture> orphan;
};

class OrphanCaptureStore {
 public:
  virtual ~OrphanCaptureStore() = default;

  // The window report: records a capture it found without a charge of ours (a new row, or the one a
  // report made before, seen again), and returns the row's status.
  virtual boost::asio::awaitable<db::DbResult<OrphanStatus>> Record(const acquirer::Capture& capture,
                                                                    std::chrono::system_clock::time_point from,
                                                                    std::chrono::system_clock::time_point to) = 0;

  // The open ones (`all`: every one), oldest capture first.
  virtual boost::asio::awaitable<db::DbResult<std::vector<OrphanCapture>>> List(bool all, int limit) = 0;
  virtual boost::asio::awaitable<db::DbResult<std::optional<OrphanCapture>>> Find(const std::string& capture_id) = 0;
  // The actions of people on it (and on the charge it was adopted as), oldest first.
  virtual boost::asio::awaitable<db::DbResult<std::vector<OperatorAction>>> Actions(const OrphanCapture& orphan) = 0;

  // Before a void is sent: counts it while the orphan is open, and returns the count. nullopt: not open
  // (or no such capture), so the void must not be sent.
  virtual boost::asio::awaitable<db::DbResult<std::optional<int>>> StartVoid(const std::string& capture_id) = 0;
  // The void's answer and its audit row, in one statement, while the orphan is open (`voided` when the
  // acquirer confirmed it). nullopt: it was not open any more (another person's void or adoption won).
  virtual boost::asio::awaitable<db::DbResult<std::optional<OrphanCapture>>> FinishVoid(const OrphanVoid& answer) = 0;

  // The adoption, in one statement: only while the orphan is open, with `voids_seen` voids on record and
  // none that may have voided (the latest refused as a request: contract_error), the merchant exists and no
  // charge holds the id or the merchant's key.
  virtual boost::asio::awaitable<db::DbResult<AdoptResult>> Adopt(const Adoption& adoption) = 0;
};

std::unique_ptr<OrphanCaptureStore> MakePgOrphanCaptureStore(db::Database& database);

}  // namespace charge_outbox::charges
