#include "acquirer_sim.hpp"

#include <spdlog/spdlog.h>

#include <boost/beast/core/string.hpp>
#include <boost/json/serialize.hpp>
#include <boost/url/parse_query.hpp>
#include <charconv>
#include <limits>
#include <system_error>

#include "charge_outbox/log/log.hpp"
#include "charge_outbox/util/sha256.hpp"
#include "delivery.hpp"
#include "problems.hpp"
#include "request_validation.hpp"
#include "responses.hpp"
#include "timestamp.hpp"

namespace charge_outbox::acquirer_sim {
namespace {

namespace asio = boost::asio;
namespace bhttp = boost::beast::http;
using http::Reply;
using http::Response;
using http::Status;

constexpr std::size_t kMaxListLimit = 1000;
constexpr std::size_t kDefaultListLimit = 100;


// Releases the in-flight mark if the request does not get to complete (Stop cancelled its latency wait).
class InFlightGuard {
 public:
  InFlightGuard(CaptureStore& store, MerchantIndex merchant, std::string_view key)
      : store_(store), merchant_(merchant), key_(key) {}
  ~InFlightGuard() {
    if (armed_) store_.AbandonCapture(merchant_, key_);
  }
  InFlightGuard(const InFlightGuard&) = delete;
  InFlightGuard& operator=(const InFlightGuard&) = delete;
  void Disarm() { armed_ = false; }

 private:
  CaptureStore& store_;
  MerchantIndex merchant_;
  std::string_view key_;
  bool armed_ = true;
};

Response MissingIdempotencyKey() {
  return FieldError("Idempotency-Key", "the Idempotency-Key header is required: 1 to 255 visible ASCII characters");
}

}  // namespace

std::string_view ToString(RequestKind kind) {
  switch (kind) {
    case RequestKind::kCapture: return "capture";
    case RequestKind::kLookup: return "lookup";
    case RequestKind::kVoid: return "void";
    case RequestKind::kList: return "list";
    case RequestKind::kSearch: return "search";
    case RequestKind::kRetrieve: return "retrieve";
    case RequestKind::kEvents: return "events";
  }
  return "?";
}

std::string MerchantIdFor(std::string_view api_key) { return "m_" + util::Sha256Hex(api_key).substr(0, 16); }

AcquirerSim::AcquirerSim(const SimConfig& config, const Clock& clock)
    : clock_(clock),
      log_(config.data_dir),
      store_(log_, clock),
      faults_(config.faults),
      stripe_(store_, faults_, requests_, config.stripe, clock),
      server_(config.http, [this](http::Request request) { return Handle(std::move(request)); }) {
  for (const auto& key : config.api_keys) credentials_.emplace_back(key, store_.InternMerchant(MerchantIdFor(key)));
  replayed_records_ = log_.Replay([this](const LogRecord& record) { store_.Apply(record); });
}

AcquirerSim::~AcquirerSim() = default;

std::uint16_t AcquirerSim::Start() { return server_.Start(); }

void AcquirerSim::Stop(std::chrono::milliseconds drain_deadline) { server_.Stop(drain_deadline); }

std::optional<MerchantIndex> AcquirerSim::Authenticate(const http::Request& request) const {
  const std::string_view header = request[bhttp::field::authorization];
  constexpr std::string_view kScheme = "bearer ";
  if (header.size() <= kScheme.size() || !boost::beast::iequals(header.substr(0, kScheme.size()), kScheme)) {
    return std::nullopt;
  }
  const std::string_view key = header.substr(kScheme.size());
  for (const auto& [credential, merchant] : credentials_) {
    if (credential == key) return merchant;
  }
  return std::nullopt;
}

asio::awaitable<Reply> AcquirerSim::Handle(http::Request request) {
  const std::string_view target = request.target();
  const auto query_start = target.find('?');
  const std::string_view path = target.substr(0, query_start);
  const std::string_view query = query_start == std::string_view::npos ? std::string_view{} : target.substr(query_start + 1);
  const auto method = request.method();

  if (path.starts_with("/v1/")) {
    const auto merchant = Authenticate(request);
    if (!merchant) {
      co_return Answer(Unauthorized());
    }
    if (StripeApi::Serves(path)) co_return co_await stripe_.Handle(request, *merchant, path, query);
    constexpr std::string_view kCaptures = "/v1/captures";
    if (path == kCaptures) {
      if (method == bhttp::verb::post) {
        Count(RequestKind::kCapture);
        co_return co_await HandleCapture(request, *merchant);
      }
      if (method == bhttp::verb::get) {
        Count(query.find("idempotency_key=") == std::string_view::npos ? RequestKind::kList : RequestKind::kLookup);
        co_return co_await HandleQuery(*merchant, query);
      }
      co_return Answer(MethodNotAllowed("GET, POST"));
    }
    if (path.starts_with(kCaptures) && path.size() > kCaptures.size() + 1 && path[kCaptures.size()] == '/') {
      const std::string_view rest = path.substr(kCaptures.size() + 1);
      const auto slash = rest.find('/');
      if (slash == std::string_view::npos) {
        if (method == bhttp::verb::get) {
          Count(RequestKind::kLookup);
          co_return co_await HandleGetById(*merchant, rest);
        }
        co_return Answer(MethodNotAllowed("GET"));
      }
      if (rest.substr(slash) == "/void" && slash > 0) {
        if (method == bhttp::verb::post) {
          Count(RequestKind::kVoid);
          co_return co_await HandleVoid(request, *merchant, rest.substr(0, slash));
        }
        co_return Answer(MethodNotAllowed("POST"));
      }
    }
    co_return Answer(NotFound("no such endpoint: " + std::string(path)));
  }
  if (path == "/healthz") {
    if (method != bhttp::verb::get) co_return Answer(MethodNotAllowed("GET"));
    co_return Answer(http::JsonResponse(Status::ok, std::string(R"({"status":"ok"})")));
  }
  if (path == "/admin/faults") {
    if (method == bhttp::verb::get) co_return Answer(http::JsonResponse(Status::ok, FaultProfileToJson(faults_.Get())));
    if (method == bhttp::verb::put) co_return Answer(PutFaults(request));
    co_return Answer(MethodNotAllowed("GET, PUT"));
  }
  if (path == "/admin/ledger") {
    if (method != bhttp::verb::get) co_return Answer(MethodNotAllowed("GET"));
    co_return Answer(Ledger());
  }
  if (path == "/admin/stats") {
    if (method != bhttp::verb::get) co_return Answer(MethodNotAllowed("GET"));
    co_return Answer(Stats());
  }
  if (path == "/admin/reset") {
    if (method != bhttp::verb::post) co_return Answer(MethodNotAllowed("POST"));
    co_return Answer(Reset());
  }
  co_return Answer(NotFound("no such endpoint: " + std::string(path)));
}

asio::awaitable<Reply> AcquirerSim::HandleCapture(const http::Request& request, MerchantIndex merchant) {
  const std::string_view key = request["Idempotency-Key"];
  if (!IsValidIdempotencyKey(key)) co_return Answer(MissingIdempotencyKey());
  auto parsed = ParseCaptureRequest(request.body());
  if (!parsed) co_return Answer(FieldError(parsed.error().field, parsed.error().detail));
  const CaptureRequest& capture = *parsed;

  const FaultDecision decision = faults_.Draw(kOpCapture, capture.payment_method);
  if (decision.throttle || decision.error) {
    spdlog::info("fault: {}; capture {} answered {}", decision.throttle ? "throttle" : "error", capture.reference,
                 decision.throttle ? 429 : 503);
    co_return Answer(FaultRefusal(decision, "; nothing was captured, retry after the delay"));
  }

  auto begun = store_.BeginCapture(merchant, key, capture);
  switch (begun.outcome) {
    case BeginOutcome::kProceed:
      break;
    case BeginOutcome::kReplayCaptured: {
      const Capture& c = *begun.capture;
      auto replayed = Replayed(Created(c.id, c.request, c.idempotency_key, c.created_at_us));
      co_return co_await DeliverReplay(std::move(replayed));
    }
    case BeginOutcome::kReplayDeclined: {
      auto replayed = Replayed(Declined(begun.decline_code));
      co_return co_await DeliverReplay(std::move(replayed));
    }
    case BeginOutcome::kInFlight:
      co_return Answer(RequestInProgress());
    case BeginOutcome::kMismatch:
      co_return Answer(
          IdempotencyKeyReused("this Idempotency-Key was used with a different request body; nothing was captured"));
  }

  InFlightGuard guard(store_, merchant, key);
  co_await Sleep(decision.latency);
  if (decision.server_error && !decision.server_error_work) {
    spdlog::info("fault: server error; capture {} not done, key left free", capture.reference);
    co_return co_await Deliver(decision, ServerError(), "server error");  // the guard frees the key
  }
  const auto visibility_us = std::chrono::duration_cast<std::chrono::microseconds>(decision.visibility_delay).count();
  auto done = store_.CompleteCapture(merchant, key, capture, decision.decline_code, visibility_us);
  guard.Disarm();
  if (decision.server_error && done.outcome != CompleteOutcome::kStorageFailed) {
    spdlog::info("fault: server error; capture {} done, answered 500", capture.reference);
    co_return co_await Deliver(decision, ServerError(), "capture");
  }
  switch (done.outcome) {
    case CompleteOutcome::kCaptured: {
      auto created_response = Created(done.id, capture, key, done.created_at_us);
      co_return co_await Deliver(decision, std::move(created_response), "capture");
    }
    case CompleteOutcome::kDeclined: {
      auto declined_response = Declined(*decision.decline_code);
      co_return co_await Deliver(decision, std::move(declined_response), "decline");
    }
    case CompleteOutcome::kStorageFailed:
      co_return Answer(StorageUnavailable());
  }
  co_return Answer(StorageUnavailable());
}

// A replay is an operation of its own (`replay` in apply_to), with its own draw: the capture's draw
// decided what a new capture would have done.
asio::awaitable<Reply> AcquirerSim::DeliverReplay(Response replayed) {
  const FaultDecision decision = faults_.Draw(kOpReplay);
  if (decision.throttle || decision.error) {
    co_return Answer(FaultRefusal(decision));
  }
  co_await Sleep(decision.latency);
  if (decision.server_error) co_return co_await Deliver(decision, ServerError(), "replay");
  co_return co_await Deliver(decision, std::move(replayed), "replay");
}

asio::awaitable<Reply> AcquirerSim::HandleQuery(MerchantIndex merchant, std::string_view query) {
  // The Boost.URL 1.81 library parse_query runs strlen over its argument's data (AddressSanitizer shows
  // it reading past the request's buffer, and a null data pointer crashes it), so it gets a
  // NUL-terminated copy. Lookups and lists are not the hot path.
  const std::string query_text(query);
  const auto params = boost::urls::parse_query(query_text);
  if (!params) co_return Answer(FieldError("query", "the query string is malformed"));
  std::optional<std::string> idempotency_key, created_from, created_to, page_token, limit_text;
  for (const auto& param : *params) {
    const std::string name = param.key.decode();
    std::optional<std::string>* target = nullptr;
    if (name == "idempotency_key") target = &idempotency_key;
    else if (name == "created_from") target = &created_from;
    else if (name == "created_to") target = &created_to;
    else if (name == "page_token") target = &page_token;
    else if (name == "limit") target = &limit_text;
    else co_return Answer(FieldError(name, "unknown query parameter \"" + name + "\""));
    if (target->has_value()) co_return Answer(FieldError(name, "\"" + name + "\" given twice"));
    *target = param.has_value ? param.value.decode() : std::string{};
  }

  if (idempotency_key.has_value()) {
    if (created_from || created_to || page_token || limit_text) {
      co_return Answer(FieldError("idempotency_key", "idempotency_key cannot be combined with list parameters"));
    }
    const FaultDecision lookup_decision = faults_.Draw(kOpLookup);
    if (lookup_decision.throttle || lookup_decision.error) {
      co_return Answer(FaultRefusal(lookup_decision));
    }
    co_await Sleep(lookup_decision.latency);
    if (lookup_decision.server_error) co_return co_await Deliver(lookup_decision, ServerError(), "lookup");
    auto found = store_.LookupByKey(merchant, *idempotency_key);
    auto lookup_response = found ? CaptureNow(*found) : NotFound("no capture with this idempotency_key");
    co_return co_await Deliver(lookup_decision, std::move(lookup_response), "lookup");
  }

  std::int64_t from_us = std::numeric_limits<std::int64_t>::min();
  std::int64_t to_us = std::numeric_limits<std::int64_t>::max();
  std::uint64_t cursor = 0;
  std::size_t limit = kDefaultListLimit;
  if (created_from) {
    const auto from_time = ParseTimestamp(*created_from);
    if (!from_time) co_return Answer(FieldError("created_from", "created_from must be an RFC 3339 date-time"));
    from_us = *from_time;
  }
  if (created_to) {
    const auto to_time = ParseTimestamp(*created_to);
    if (!to_time) co_return Answer(FieldError("created_to", "created_to must be an RFC 3339 date-time"));
    to_us = *to_time;
  }
  if (page_token) {
    const auto c = ParsePageToken(*page_token);
    if (!c) co_return Answer(FieldError("page_token", "page_token is not one this acquirer issued"));
    cursor = *c;
  }
  if (limit_text) {
    std::size_t n = 0;
    const auto [end, ec] = std::from_chars(limit_text->data(), limit_text->data() + limit_text->size(), n);
    if (ec != std::errc{} || end != limit_text->data() + limit_text->size() || n < 1 || n > kMaxListLimit) {
      co_return Answer(FieldError("limit", "limit must be an integer from 1 to 1000"));
    }
    limit = n;
  }
  const FaultDecision list_decision = faults_.Draw(kOpList);
  if (list_decision.throttle || list_decision.error) {
    co_return Answer(FaultRefusal(list_decision));
  }
  co_await Sleep(list_decision.latency);
  if (list_decision.server_error) co_return co_await Deliver(list_decision, ServerError(), "list");
  const auto page = store_.List(merchant, from_us, to_us, cursor, limit);
  auto list_response = CapturePage(page);
  co_return co_await Deliver(list_decision, std::move(list_response), "list");
}

asio::awaitable<Reply> AcquirerSim::HandleGetById(MerchantIndex merchant, std::string_view id) {
  const FaultDecision decision = faults_.Draw(kOpLookup);
  if (decision.throttle || decision.error) {
    co_return Answer(FaultRefusal(decision));
  }
  co_await Sleep(decision.latency);
  if (decision.server_error) co_return co_await Deliver(decision, ServerError(), "lookup");
  auto found = store_.LookupById(merchant, id);
  auto response = found ? CaptureNow(*found) : NotFound("no capture with this id");
  co_return co_await Deliver(decision, std::move(response), "lookup");
}

asio::awaitable<Reply> AcquirerSim::HandleVoid(const http::Request& request, MerchantIndex merchant,
                                               std::string_view id) {
  const std::string_view key = request["Idempotency-Key"];
  if (!IsValidIdempotencyKey(key)) co_return Answer(MissingIdempotencyKey());
  const FaultDecision decision = faults_.Draw(kOpVoid);
  if (decision.throttle || decision.error) {
    co_return Answer(FaultRefusal(decision, "; nothing was voided"));
  }
  co_await Sleep(decision.latency);
  if (decision.server_error && !decision.server_error_work) co_return co_await Deliver(decision, ServerError(), "void");
  const auto window_us = std::chrono::duration_cast<std::chrono::microseconds>(decision.void_window).count();
  const auto result = store_.Void(merchant, key, id, window_us);
  if (decision.server_error && result.outcome != VoidOutcome::kStorageFailed) {
    co_return co_await Deliver(decision, ServerError(), "void");
  }
  Response response;
  switch (result.outcome) {
    case VoidOutcome::kVoided:
    case VoidOutcome::kAlreadyVoided: {
      response = Voided(*result.capture);
      break;
    }
    case VoidOutcome::kNotFound:
      co_return Answer(NotFound("no capture with this id"));
    case VoidOutcome::kMismatch:
      co_return Answer(
          IdempotencyKeyReused("this Idempotency-Key was used to void another capture; nothing was voided"));
    case VoidOutcome::kSettled:
      co_return Answer(CaptureSettled());
    case VoidOutcome::kStorageFailed:
      co_return Answer(StorageUnavailable());
  }
  co_return co_await Deliver(decision, std::move(response), "void");
}

Response AcquirerSim::PutFaults(const http::Request& request) {
  auto parsed = ParseFaultProfileText(request.body(), faults_.Get().seed);
  if (!parsed) return InvalidFaultProfile(parsed.error());
  faults_.Set(*parsed);
  spdlog::info("fault profile set: {}", boost::json::serialize(FaultProfileToJson(*parsed)));
  return http::JsonResponse(Status::ok, FaultProfileToJson(*parsed));
}

Response AcquirerSim::Stats() const {
  boost::json::object stats;
  stats["captures"] = store_.CaptureCount();
  stats["in_flight"] = store_.InFlightCount();
  boost::json::object requests;
  for (const auto kind : kRequestKinds) requests[ToString(kind)] = requests_.Get(kind);
  stats["requests"] = std::move(requests);
  return http::JsonResponse(Status::ok, stats);
}

Response AcquirerSim::Ledger() const {
  return LedgerEntries(store_.Ledger(), store_);
}

Response AcquirerSim::Reset() {
  if (!store_.Reset()) return StorageUnavailable();
  faults_.Reset();
  requests_.Reset();
  spdlog::info("reset: captures, voids and declines forgotten, log emptied, fault profile back to its start-up value");
  return http::JsonResponse(Status::ok, std::string(R"({"status":"reset"})"));
}

int Run(const SimConfig& config, const app::ShutdownSignals& signals) {
  SystemClock clock;
  std::unique_ptr<AcquirerSim> sim;
  try {
    sim = std::make_unique<AcquirerSim>(config, clock);
  } catch (const LogError& e) {
    spdlog::error("cannot start: {}", e.what());
    return 1;
  }
  std::uint16_t port = 0;
  try {
    port = sim->Start();
  } catch (const std::system_error& e) {
    spdlog::error("cannot listen on {}:{}: {}; check http.address and http.port", config.http.address,
                  config.http.port, e.what());
    return 1;
  }
  // stdout is a file or a pipe in production, so fully buffered: flush at least once a second.
  spdlog::flush_every(std::chrono::seconds{1});
  spdlog::info("acquirer-sim listening on {}:{}; {} record(s) replayed from {}", config.http.address, port,
               sim->replayed_records(), sim->log_path());
  log::Flush();
  return app::RunUntilSignal(signals, config.shutdown_deadline,
                             [&](std::chrono::milliseconds drain) { sim->Stop(drain); });
}

}  // namespace charge_outbox::acquirer_sim
