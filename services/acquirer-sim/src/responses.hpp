// The acquirer's successful answers and their JSON bodies (the contract is in README.md). A capture's
// 201 is built from the capture's fields alone, so a replay repeats it byte for byte.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "capture_store.hpp"
#include "charge_outbox/http/server.hpp"

namespace charge_outbox::acquirer_sim {

// 201 with Location: the capture as created ("captured", no voided_at, whatever happened since).
http::Response Created(std::string_view id, const CaptureRequest& request, std::string_view idempotency_key,
                       std::int64_t created_at_us);
// 402 {"status":"declined","decline_code":...}.
http::Response Declined(std::string_view decline_code);
// The same answer, marked Idempotent-Replayed: true.
http::Response Replayed(http::Response response);
// 200: the capture as it is now, "voided" with voided_at once voided.
http::Response CaptureNow(const Capture& capture);
// 200 {"id","status":"voided","voided_at"}.
http::Response Voided(const Capture& capture);
// 200 {"data":[captures as they are now],"next_page_token":...}.
http::Response CapturePage(const ListPage& page);
// 200 {"entries":[...]}: /admin/ledger, every capture and void in order, with its merchant's id.
http::Response LedgerEntries(const std::vector<LedgerEntry>& entries, const CaptureStore& store);

}  // namespace charge_outbox::acquirer_sim
