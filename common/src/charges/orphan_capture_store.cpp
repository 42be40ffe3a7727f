#include "charge_outbox/charges/orphan_capture_store.hpp"

namespace charge_outbox::charges {

std::string_view ToString(OrphanStatus status) {
  switch (status) {
    case OrphanStatus::kOpen: return "open";
    case OrphanStatus::kVoided: return "voided";
    case OrphanStatus::kAdopted: return "adopted";
  }
  return "?";
}

}  // namespace charge_outbox::charges
