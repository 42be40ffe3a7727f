#include "charge_outbox/retry/retryability.hpp"

namespace charge_outbox::retry {

std::string_view ToString(Retryability retryability) {
  switch (retryability) {
    case Retryability::kDefinitive: return "definitive";
    case Retryability::kTransient: return "transient";
    case Retryability::kNever: return "never";
  }
  return "?";
}

}  // namespace charge_outbox::retry
