#include "responses.hpp"

#include <string>

#include "json_text.hpp"
#include "request_validation.hpp"
#include "timestamp.hpp"

namespace charge_outbox::acquirer_sim {
namespace {

namespace bhttp = boost::beast::http;
namespace json = boost::json;
using http::Response;
using http::Status;

// A capture as the API shows it. `voided_at_us` 0: as created (the 201 and its replays), or not voided.
json::object CaptureObject(JsonArena& arena, std::string_view id, const CaptureRequest& request,
                           std::string_view idempotency_key, std::int64_t created_at_us, std::int64_t voided_at_us) {
  auto capture = arena.Object();
  capture.reserve(9);
  capture.emplace("id", id);
  capture.emplace("status", voided_at_us != 0 ? "voided" : "captured");
  capture.emplace("amount", request.amount);
  capture.emplace("currency", request.currency);
  capture.emplace("reference", request.reference);
  capture.emplace("payment_method", request.payment_method);
  capture.emplace("idempotency_key", idempotency_key);
  capture.emplace("created_at", TimestampText(created_at_us).view());
  if (voided_at_us != 0) capture.emplace("voided_at", TimestampText(voided_at_us).view());
  return capture;
}

json::object CurrentCapture(JsonArena& arena, const Capture& c) {
  return CaptureObject(arena, c.id, c.request, c.idempotency_key, c.created_at_us, c.voided_at_us);
}

Response Ok(const json::object& body) { return http::JsonResponse(Status::ok, JsonText(body)); }

}  // namespace

Response Created(std::string_view id, const CaptureRequest& request, std::string_view idempotency_key,
                 std::int64_t created_at_us) {
  JsonArena arena;
  auto response =
      http::JsonResponse(Status::created, JsonText(CaptureObject(arena, id, request, idempotency_key, created_at_us, 0)));
  response.set(bhttp::field::location, "/v1/captures/" + std::string(id));
  return response;
}

Response Declined(std::string_view decline_code) {
  JsonArena arena;
  auto body = arena.Object();
  body.emplace("status", "declined");
  body.emplace("decline_code", decline_code);
  return http::JsonResponse(Status::payment_required, JsonText(body));
}

Response Replayed(Response response) {
  response.set("Idempotent-Replayed", "true");
  return response;
}

Response CaptureNow(const Capture& capture) {
  JsonArena arena;
  return Ok(CurrentCapture(arena, capture));
}

Response Voided(const Capture& capture) {
  JsonArena arena;
  auto body = arena.Object();
  body.emplace("id", capture.id);
  body.emplace("status", "voided");
  body.emplace("voided_at", TimestampText(capture.voided_at_us).view());
  return Ok(body);
}

Response CapturePage(const ListPage& page) {
  JsonArena arena;
  json::array data(arena.storage());
  data.reserve(page.captures.size());
  for (const auto& capture : page.captures) data.emplace_back(CurrentCapture(arena, capture));
  auto body = arena.Object();
  body.emplace("data", std::move(data));
  if (page.next_cursor) {
    body.emplace("next_page_token", PageToken(*page.next_cursor));
  } else {
    body.emplace("next_page_token", nullptr);
  }
  return Ok(body);
}

Response LedgerEntries(const std::vector<LedgerEntry>& entries, const CaptureStore& store) {
  JsonArena arena;
  json::array list(arena.storage());
  list.reserve(entries.size());
  for (const auto& entry : entries) {
    auto item = arena.Object();
    item.reserve(8);
    item.emplace("type", entry.type == RecordType::kVoid ? "void" : "capture");
    item.emplace("id", entry.capture.id);
    item.emplace("idempotency_key", entry.idempotency_key);
    item.emplace("reference", entry.capture.request.reference);
    item.emplace("amount", entry.capture.request.amount);
    item.emplace("currency", entry.capture.request.currency);
    item.emplace("created_at", TimestampText(entry.at_us).view());
    item.emplace("merchant", store.MerchantId(entry.capture.merchant));
    list.emplace_back(std::move(item));
  }
  auto body = arena.Object();
  body.emplace("entries", std::move(list));
  return Ok(body);
}

}  // namespace charge_outbox::acquirer_sim
