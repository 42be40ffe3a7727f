#include "charge_outbox/acquirer/model.hpp"

namespace charge_outbox::acquirer {

EvidenceClass EvidenceOf(OutcomeKind kind) {
  switch (kind) {
    case OutcomeKind::kCaptured:
    case OutcomeKind::kVoided:
    case OutcomeKind::kPage:
      return EvidenceClass::kApproved;
    case OutcomeKind::kDeclined:
      return EvidenceClass::kDeclined;
    case OutcomeKind::kNotSent:
      return EvidenceClass::kNotSent;
    // A lookup's 404 may be a read too early or the wrong environment, so it proves nothing
    // (docs/background.md, "What each piece of evidence proves").
    case OutcomeKind::kNotFound:
    case OutcomeKind::kTimedOut:
    case OutcomeKind::kConnectionDropped:
    case OutcomeKind::kServerError:
    case OutcomeKind::kStoredError:
    case OutcomeKind::kUnavailable:
    case OutcomeKind::kThrottled:
    case OutcomeKind::kInFlight:
    case OutcomeKind::kUntrustedResponse:
    case OutcomeKind::kMismatch:
    case OutcomeKind::kContractError:
      return EvidenceClass::kUnknown;
  }
  return EvidenceClass::kUnknown;
}

retry::Retryability RetryabilityOf(OutcomeKind kind) {
  switch (kind) {
    case OutcomeKind::kCaptured:
    case OutcomeKind::kDeclined:
    case OutcomeKind::kVoided:
    case OutcomeKind::kPage:
    case OutcomeKind::kNotFound:
      return retry::Retryability::kDefinitive;
    // All safe because every retry carries the same idempotency key: the acquirer replays what it did.
    case OutcomeKind::kNotSent:
    case OutcomeKind::kTimedOut:
    case OutcomeKind::kConnectionDropped:
    case OutcomeKind::kServerError:
    case OutcomeKind::kUnavailable:
    case OutcomeKind::kThrottled:
    case OutcomeKind::kInFlight:
    case OutcomeKind::kUntrustedResponse:
      return retry::Retryability::kTransient;
    // The acquirer would give the same answer again (a stored error: for this key, forever); a lookup or a
    // person has to look at the data or the config.
    case OutcomeKind::kStoredError:
    case OutcomeKind::kMismatch:
    case OutcomeKind::kContractError:
      return retry::Retryability::kNever;
  }
  return retry::Retryability::kNever;
}

EvidenceClass AttemptOutcome::evidence() const { return EvidenceOf(kind); }
retry::Retryability AttemptOutcome::retryability() const { return RetryabilityOf(kind); }

std::string_view ToString(Operation operation) {
  switch (operation) {
    case Operation::kCapture: return "capture";
    case Operation::kLookup: return "lookup";
    case Operation::kList: return "list";
    case Operation::kVoid: return "void";
  }
  return "?";
}

std::string_view ToString(EvidenceClass evidence) {
  switch (evidence) {
    case EvidenceClass::kNotSent: return "not_sent";
    case EvidenceClass::kUnknown: return "unknown";
    case EvidenceClass::kDeclined: return "declined";
    case EvidenceClass::kApproved: return "approved";
  }
  return "?";
}

std::string_view ToString(OutcomeKind kind) {
  switch (kind) {
    case OutcomeKind::kCaptured: return "captured";
    case OutcomeKind::kDeclined: return "declined";
    case OutcomeKind::kVoided: return "voided";
    case OutcomeKind::kPage: return "page";
    case OutcomeKind::kNotFound: return "not_found";
    case OutcomeKind::kNotSent: return "not_sent";
    case OutcomeKind::kTimedOut: return "timed_out";
    case OutcomeKind::kConnectionDropped: return "connection_dropped";
    case OutcomeKind::kServerError: return "server_error";
    case OutcomeKind::kStoredError: return "stored_error";
    case OutcomeKind::kUnavailable: return "unavailable";
    case OutcomeKind::kThrottled: return "throttled";
    case OutcomeKind::kInFlight: return "in_flight";
    case OutcomeKind::kUntrustedResponse: return "untrusted_response";
    case OutcomeKind::kMismatch: return "mismatch";
    case OutcomeKind::kContractError: return "contract_error";
  }
  return "?";
}

std::string_view ToString(TransportStatus status) {
  switch (status) {
    case TransportStatus::kResponse: return "response";
    case TransportStatus::kResolveFailed: return "resolve_failed";
    case TransportStatus::kResolveTimedOut: return "resolve_timed_out";
    case TransportStatus::kConnectRefused: return "connect_refused";
    case TransportStatus::kConnectTimedOut: return "connect_timed_out";
    case TransportStatus::kConnectFailed: return "connect_failed";
    case TransportStatus::kTlsFailed: return "tls_failed";
    case TransportStatus::kPoolTimedOut: return "pool_timed_out";
    case TransportStatus::kWriteFailed: return "write_failed";
    case TransportStatus::kSendTimedOut: return "send_timed_out";
    case TransportStatus::kResponseTimedOut: return "response_timed_out";
    case TransportStatus::kConnectionDropped: return "connection_dropped";
    case TransportStatus::kResponseMalformed: return "response_malformed";
  }
  return "?";
}

std::string_view ToString(CaptureStatus status) {
  switch (status) {
    case CaptureStatus::kCaptured: return "captured";
    case CaptureStatus::kVoided: return "voided";
  }
  return "?";
}

}  // namespace charge_outbox::acquirer
