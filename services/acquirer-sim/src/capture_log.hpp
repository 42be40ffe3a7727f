// Capture log: the acquirer's durable state, an append-only file of JSON lines (one record per capture,
// decline or void) in the data directory. A record is written with one write(2) before the answer that
// depends on it is sent; the page cache keeps it even if the process is SIGKILLed right after, so no
// fsync is needed (a machine crash can lose the tail, which a simulator may). The format is in README.md.
#pragma once

#include <boost/system/result.hpp>
#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>

namespace charge_outbox::acquirer_sim {

struct CaptureRequest {
  std::int64_t amount = 0;
  std::string currency;
  std::string reference;
  std::string payment_method;

  bool operator==(const CaptureRequest&) const = default;
};

// kPaymentIntent, kRefund and kStripeAnswer are the Stripe dialect's: a PaymentIntent made (captured or
// declined), a refund, and the answer stored under a Stripe Idempotency-Key.
enum class RecordType { kCapture, kDecline, kVoid, kPaymentIntent, kRefund, kStripeAnswer };

struct LogRecord {
  RecordType type = RecordType::kCapture;
  std::string merchant;         // the merchant credential's id, never the credential
  std::string idempotency_key;  // of the capture (capture, decline, payment_intent) or of the void (void, refund)
  std::string id;               // capture id (capture, void), PaymentIntent id (payment_intent, refund)
  CaptureRequest request;       // capture, decline, payment_intent
  std::string decline_code;     // decline; payment_intent: empty when it succeeded
  std::int64_t created_at_us = 0;  // stripe_answer: the key's first use
  std::int64_t visible_at_us = 0;  // capture, payment_intent
  std::int64_t searchable_at_us = 0;  // payment_intent
  std::string charge_id;   // payment_intent: its charge (ch_)
  std::string refund_id;   // refund (re_)
  std::string event_id;    // payment_intent, refund: the event it caused (evt_)
  std::string request_id;  // payment_intent, refund: the request that made it (req_)
  std::string params;      // stripe_answer: the request's parsed parameters, canonical
  std::int64_t status = 0; // stripe_answer: HTTP status
  std::string body;        // stripe_answer: the body, byte for byte

  bool operator==(const LogRecord&) const = default;
};

// Appends one line, '\n' included. The three Append*Record functions let the hot path encode from the
// store's own fields without building a LogRecord; EncodeRecord is the same encoding.
void AppendCaptureRecord(std::string& out, std::string_view merchant, std::string_view idempotency_key,
                         std::string_view id, const CaptureRequest& request, std::int64_t created_at_us,
                         std::int64_t visible_at_us);
void AppendDeclineRecord(std::string& out, std::string_view merchant, std::string_view idempotency_key,
                         const CaptureRequest& request, std::string_view decline_code, std::int64_t created_at_us);
void AppendVoidRecord(std::string& out, std::string_view merchant, std::string_view idempotency_key,
                      std::string_view capture_id, std::int64_t created_at_us);
void EncodeRecord(const LogRecord& record, std::string& out);

// One line (without its '\n'); the error says what is wrong with it.
boost::system::result<LogRecord, std::string> DecodeRecord(std::string_view line);

// Where the store makes its changes durable. Append must not return before the line would survive the
// process being killed.
class RecordSink {
 public:
  virtual ~RecordSink() = default;
  virtual bool Append(std::string_view lines) = 0;
  // Empties the log (POST /admin/reset).
  virtual bool Truncate() = 0;
};

class LogError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The file `captures.jsonl` in a data directory. Holds an exclusive flock on it, so a second simulator
// pointed at the same directory refuses to start instead of interleaving writes. Thread-compatible: the
// store serialises calls.
class CaptureLogFile final : public RecordSink {
 public:
  // Creates the directory and the file if needed. Throws LogError with a hint.
  explicit CaptureLogFile(const std::string& data_dir);
  ~CaptureLogFile() override;
  CaptureLogFile(const CaptureLogFile&) = delete;
  CaptureLogFile& operator=(const CaptureLogFile&) = delete;

  // Calls `apply` with each record in order. A last line without its '\n' (a write cut short) is
  // removed from the file with a warning; any other bad line throws LogError naming the file and line.
  // Returns the number of records read.
  std::size_t Replay(const std::function<void(const LogRecord&)>& apply);

  bool Append(std::string_view lines) override;
  bool Truncate() override;

  const std::string& path() const { return path_; }

 private:
  std::string path_;
  int fd_ = -1;
};

}  // namespace charge_outbox::acquirer_sim
