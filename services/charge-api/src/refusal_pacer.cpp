#include "refusal_pacer.hpp"

namespace charge_outbox::charge_api {

ClientRefusalPacer::ClientRefusalPacer(const RefusalPacing& pacing, ChargeApiProbe& probe)
    : answers_(pacing.rule, pacing.clients), max_wait_(pacing.max_wait), probe_(probe) {}

std::chrono::milliseconds ClientRefusalPacer::HoldFor(const std::string& client) {
  // Rounded up: a hold shorter than a millisecond is still a hold, and the timer's resolution.
  const auto hold = std::chrono::ceil<std::chrono::milliseconds>(answers_.Reserve(client, max_wait_));
  if (hold > std::chrono::milliseconds::zero()) probe_.OnRefusalHeld();
  return hold;
}

}  // namespace charge_outbox::charge_api
