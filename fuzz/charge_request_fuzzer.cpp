// The JSON body of POST /v1/charges on raw bytes: ParseChargeRequest, the field rules of what it accepts,
// and the round trip of an accepted request (charge_request_checks.hpp).
#include "charge_request_checks.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  charge_outbox::fuzz::CheckChargeRequest(charge_outbox::fuzz::Bytes(data, size));
  return 0;
}
