#include "acquirer_sim.hpp"

#include <spdlog/spdlog.h>

#include <boost/asio/ip/address.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/json/monotonic_resource.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <boost/url/parse_query.hpp>
#include <algorithm>
#include <charconv>
#include <limits>
#include <system_error>

#include "charge_outbox/log/log.hpp"
#include "charge_outbox/util/sha256.hpp"
#include "timestamp.hpp"

namespace charge_outbox::acquirer_sim {
namespace {

namespace asio = boost::asio;
namespace bhttp = boost::beast::http;
namespace json = boost::json;
using http::Reply;

}  // namespace

std::string_view ToString(RequestKind kind) {
  switch (kind) {
    case RequestKind::kCapture: return "capture";
    case RequestKind::kLookup: return "lookup";
    case RequestKind::kVoid: return "void";
    case RequestKind::kList: return "list";
  }
  return "?";
}

namespace {
using http::Response;
using http::Status;

constexpr std::size_t kMaxListLimit = 1000;
constexpr std::size_t kDefaultListLimit = 100;
constexpr std::size_t kMaxTextField = 255;
constexpr const char* kPageTokenPrefix = "pt_";

asio::awaitable<void> Sleep(std::chrono::milliseconds duration) {
  if (duration.count() <= 0) co_return;
  asio::steady_timer timer(co_await asio::this_coro::executor, duration);
  co_await timer.async_wait(asio::use_awaitable);
}

Reply Answer(Response response) { return Reply{std::move(response), false}; }

Response Problem(Status status, std::string_view title, std::string_view detail, const json::object& extra = {}) {
  return http::ProblemJson(status, title, detail, extra);
}

Response FieldError(std::string_view field, std::string_view detail) {
  json::object extra;
  extra["field"] = field;
  return Problem(Status::bad_request, "Invalid request", detail, extra);
}

Response WithRetryAfter(Response response, std::int64_t seconds) {
  response.set(bhttp::field::retry_after, std::to_string(seconds));
  return response;
}

Response MethodNotAllowed(std::string_view allow) {
  auto response = Problem(Status::method_not_allowed, "Method not allowed", "this path accepts " + std::string(allow));
  response.set(bhttp::field::allow, allow);
  return response;
}

Response NotFound(std::string_view detail) { return Problem(Status::not_found, "Not found", detail); }

Response StorageUnavailable() {
  return Problem(Status::service_unavailable, "Storage unavailable",
                 "the capture log could not be written; nothing was captured, retry later");
}

void AppendField(std::string& out, std::string_view name, std::string_view value) {
  out += '"';
  out += name;
  out += "\":\"";
  log::AppendJsonEscaped(value, out);
  out += "\",";
}

void AppendIntegerField(std::string& out, std::string_view name, std::int64_t value) {
  out += '"';
  out += name;
  out += "\":";
  char buf[24];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, value);
  out.append(buf, end);
  out += ',';
}

void AppendTimeField(std::string& out, std::string_view name, std::int64_t micros) {
  out += '"';
  out += name;
  out += "\":\"";
  AppendTimestamp(micros, out);
  out += "\",";
}

// A capture as the API shows it. `as_created` gives the body of the original 201 (what a replay must
// repeat byte for byte); otherwise the current state, "voided" with voided_at once voided.
void AppendCaptureJson(std::string& out, std::string_view id, const CaptureRequest& request,
                       std::string_view idempotency_key, std::int64_t created_at_us, std::int64_t voided_at_us,
                       bool as_created) {
  out += '{';
  AppendField(out, "id", id);
  const bool voided = !as_created && voided_at_us != 0;
  AppendField(out, "status", voided ? "voided" : "captured");
  AppendIntegerField(out, "amount", request.amount);
  AppendField(out, "currency", request.currency);
  AppendField(out, "reference", request.reference);
  AppendField(out, "payment_method", request.payment_method);
  AppendField(out, "idempotency_key", idempotency_key);
  AppendTimeField(out, "created_at", created_at_us);
  if (voided) AppendTimeField(out, "voided_at", voided_at_us);
  out.back() = '}';
}

std::string CaptureJson(const Capture& c, bool as_created) {
  std::string out;
  out.reserve(256);
  AppendCaptureJson(out, c.id, c.request, c.idempotency_key, c.created_at_us, c.voided_at_us, as_created);
  return out;
}

Response Created(std::string body, std::string_view id) {
  auto response = http::JsonResponse(Status::created, std::move(body));
  response.set(bhttp::field::location, "/v1/captures/" + std::string(id));
  return response;
}

Response Declined(std::string_view decline_code) {
  std::string body = "{";
  AppendField(body, "status", "declined");
  AppendField(body, "decline_code", decline_code);
  body.back() = '}';
  return http::JsonResponse(Status::payment_required, std::move(body));
}

Response Replayed(Response response) {
  response.set("Idempotent-Replayed", "true");
  return response;
}

std::string PageToken(std::uint64_t cursor) {
  char buf[32];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, cursor, 16);
  return kPageTokenPrefix + std::string(buf, end);
}

std::optional<std::uint64_t> ParsePageToken(std::string_view token) {
  if (!token.starts_with(kPageTokenPrefix)) return std::nullopt;
  token.remove_prefix(std::string_view(kPageTokenPrefix).size());
  std::uint64_t cursor = 0;
  const auto [end, ec] = std::from_chars(token.data(), token.data() + token.size(), cursor, 16);
  if (ec != std::errc{} || end != token.data() + token.size() || token.empty()) return std::nullopt;
  return cursor;
}

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

std::vector<std::string> SplitList(const std::string& text) {
  std::vector<std::string> items;
  std::size_t start = 0;
  while (start <= text.size()) {
    auto end = text.find(',', start);
    if (end == std::string::npos) end = text.size();
    auto item = text.substr(start, end - start);
    const auto first = item.find_first_not_of(" \t");
    const auto last = item.find_last_not_of(" \t");
    items.push_back(first == std::string::npos ? std::string{} : item.substr(first, last - first + 1));
    start = end + 1;
  }
  return items;
}

}  // namespace

bool IsValidIdempotencyKey(std::string_view key) {
  if (key.empty() || key.size() > kMaxTextField) return false;
  for (const char c : key) {
    if (c < 0x21 || c > 0x7e) return false;
  }
  return true;
}

boost::system::result<CaptureRequest, FieldProblem> ParseCaptureRequest(std::string_view body) {
  // Parsed into a stack buffer: a capture body is small, and this is the hot path.
  unsigned char storage[2048];
  json::monotonic_resource resource(storage, sizeof storage);
  json::parse_options options;
  options.max_depth = 4;
  boost::system::error_code ec;
  const auto value = json::parse(body, ec, &resource, options);
  if (ec) return FieldProblem{"body", "the body is not valid JSON: " + ec.message()};
  if (!value.is_object()) return FieldProblem{"body", "the body must be a JSON object"};
  CaptureRequest request;
  bool has_amount = false;
  std::string* text_target = nullptr;
  for (const auto& member : value.get_object()) {
    const std::string_view name = member.key();
    const auto& v = member.value();
    if (name == "amount") {
      if (v.is_int64() && v.get_int64() > 0) {
        request.amount = v.get_int64();
      } else if (v.is_uint64() && v.get_uint64() <= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
        request.amount = static_cast<std::int64_t>(v.get_uint64());
      } else {
        return FieldProblem{"amount", "amount must be an integer number of minor units greater than 0"};
      }
      has_amount = true;
      continue;
    }
    if (name == "currency") {
      const bool ok = v.is_string() && v.get_string().size() == 3 &&
                      std::all_of(v.get_string().begin(), v.get_string().end(), [](char c) { return c >= 'A' && c <= 'Z'; });
      if (!ok) return FieldProblem{"currency", "currency must be an ISO 4217 code of three upper-case letters"};
      request.currency = std::string(v.get_string());
      continue;
    }
    if (name == "reference") text_target = &request.reference;
    else if (name == "payment_method") text_target = &request.payment_method;
    else return FieldProblem{std::string(name), "unknown member \"" + std::string(name) + "\""};
    if (!v.is_string() || v.get_string().empty() || v.get_string().size() > kMaxTextField) {
      return FieldProblem{std::string(name), std::string(name) + " must be a string of 1 to 255 characters"};
    }
    *text_target = std::string(v.get_string());
  }
  if (!has_amount) return FieldProblem{"amount", "amount is required"};
  if (request.currency.empty()) return FieldProblem{"currency", "currency is required"};
  if (request.reference.empty()) return FieldProblem{"reference", "reference is required"};
  if (request.payment_method.empty()) return FieldProblem{"payment_method", "payment_method is required"};
  return request;
}

std::string MerchantIdFor(std::string_view api_key) { return "m_" + util::Sha256Hex(api_key).substr(0, 16); }

SimConfig LoadConfig(config::ConfigReader& reader) {
  using std::chrono::milliseconds;
  SimConfig c;
  // server.* was this daemon's own spelling; every daemon now says http.*.
  for (const char* name : {"address", "port", "threads", "body_limit", "read_timeout", "idle_timeout", "max_connections"}) {
    reader.Renamed(std::string("server.") + name, std::string("http.") + name);
  }
  c.http.address = reader.String("http.address", "127.0.0.1");
  boost::system::error_code address_error;
  asio::ip::make_address(c.http.address, address_error);
  if (address_error) {
    throw config::ConfigError("http.address", "expected an IP address such as 127.0.0.1 or 0.0.0.0, got \"" +
                                                  c.http.address + "\"");
  }
  c.http.port = static_cast<std::uint16_t>(reader.Integer("http.port", 8090, 0, 65535));
  c.http.threads = static_cast<std::size_t>(reader.Integer("http.threads", 1, 1, 64));
  c.http.body_limit = static_cast<std::size_t>(reader.Integer("http.body_limit", 16 * 1024, 256, 1 << 20));
  c.http.read_timeout = reader.Duration("http.read_timeout", std::chrono::seconds{10}, milliseconds{1});
  c.http.idle_timeout = reader.Duration("http.idle_timeout", std::chrono::seconds{60}, milliseconds{1});
  c.http.max_connections = static_cast<std::size_t>(reader.Integer("http.max_connections", 10'000, 1, 1'000'000));
  c.data_dir = reader.String("data.dir");
  for (auto& key : SplitList(reader.Secret("auth.api_keys"))) {
    if (key.empty()) {
      throw config::ConfigError("auth.api_keys", "an empty key in the list; set AUTH_API_KEYS to keys separated by commas");
    }
    c.api_keys.push_back(std::move(key));
  }
  c.faults = LoadFaultProfile(reader);
  c.shutdown_deadline = reader.Duration("shutdown.deadline", std::chrono::seconds{10}, milliseconds{100});
  c.log_level = reader.Choice("log.level", "info", {std::begin(log::kLevels), std::end(log::kLevels)});
  reader.RejectUnknownKeys();
  return c;
}

CommandLine ParseCommandLine(const std::vector<std::string>& args) {
  constexpr const char* kUsage = "usage: acquirer-sim [--config PATH]";
  CommandLine cli;
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--config") {
      if (i + 1 >= args.size()) throw config::ConfigError("--config", std::string("needs a value; ") + kUsage);
      cli.config_path = args[++i];
    } else {
      throw config::ConfigError("argv", "unexpected argument \"" + args[i] + "\"; " + kUsage);
    }
  }
  return cli;
}

AcquirerSim::AcquirerSim(const SimConfig& config, const Clock& clock)
    : clock_(clock),
      log_(config.data_dir),
      store_(log_, clock),
      faults_(config.faults),
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
      auto response = Problem(Status::unauthorized, "Unauthorized",
                              "send Authorization: Bearer <key> with a key this acquirer knows");
      response.set(bhttp::field::www_authenticate, "Bearer");
      co_return Answer(std::move(response));
    }
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
    json::object stats;
    stats["captures"] = store_.CaptureCount();
    stats["in_flight"] = store_.InFlightCount();
    json::object requests;
    for (const auto kind : {RequestKind::kCapture, RequestKind::kLookup, RequestKind::kVoid, RequestKind::kList}) {
      requests[ToString(kind)] = requests_[static_cast<std::size_t>(kind)].load();
    }
    stats["requests"] = std::move(requests);
    co_return Answer(http::JsonResponse(Status::ok, stats));
  }
  if (path == "/admin/reset") {
    if (method != bhttp::verb::post) co_return Answer(MethodNotAllowed("POST"));
    co_return Answer(Reset());
  }
  co_return Answer(NotFound("no such endpoint: " + std::string(path)));
}

asio::awaitable<Reply> AcquirerSim::Deliver(const FaultDecision& decision, Response response, std::string_view what) {
  if (decision.drop) {
    spdlog::info("fault: drop; {} done, connection closed without an answer", what);
    co_return Reply{Response{}, true};
  }
  if (decision.timeout) {
    spdlog::info("fault: timeout; {} done, answering in {}ms", what, decision.timeout_delay.count());
    co_await Sleep(decision.timeout_delay);
  }
  co_return Answer(std::move(response));
}

asio::awaitable<Reply> AcquirerSim::HandleCapture(const http::Request& request, MerchantIndex merchant) {
  const std::string_view key = request["Idempotency-Key"];
  if (!IsValidIdempotencyKey(key)) {
    co_return Answer(FieldError("Idempotency-Key", "the Idempotency-Key header is required: 1 to 255 visible ASCII characters"));
  }
  auto parsed = ParseCaptureRequest(request.body());
  if (!parsed) co_return Answer(FieldError(parsed.error().field, parsed.error().detail));
  const CaptureRequest& capture = *parsed;

  const FaultDecision decision = faults_.Draw(kOpCapture, capture.payment_method);
  if (decision.throttle) {
    spdlog::info("fault: throttle; capture {} answered 429", capture.reference);
    co_return Answer(WithRetryAfter(Problem(Status::too_many_requests, "Too many requests",
                                            "rate limit exceeded; nothing was captured, retry after the delay"),
                                    decision.retry_after_s));
  }
  if (decision.error) {
    spdlog::info("fault: error; capture {} answered 503", capture.reference);
    co_return Answer(WithRetryAfter(Problem(Status::service_unavailable, "Service unavailable",
                                            "temporary failure; nothing was captured, retry after the delay"),
                                    decision.retry_after_s));
  }

  auto begun = store_.BeginCapture(merchant, key, capture);
  switch (begun.outcome) {
    case BeginOutcome::kProceed:
      break;
    case BeginOutcome::kReplayCaptured: {
      auto replayed = Replayed(Created(CaptureJson(*begun.capture, true), begun.capture->id));
      co_return co_await DeliverReplay(std::move(replayed));
    }
    case BeginOutcome::kReplayDeclined: {
      auto replayed = Replayed(Declined(begun.decline_code));
      co_return co_await DeliverReplay(std::move(replayed));
    }
    case BeginOutcome::kInFlight:
      co_return Answer(WithRetryAfter(Problem(Status::conflict, "Request in progress",
                                              "a request with this Idempotency-Key is still being processed; retry later"),
                                      1));
    case BeginOutcome::kMismatch:
      co_return Answer(Problem(Status::unprocessable_entity, "Idempotency key reused",
                               "this Idempotency-Key was used with a different request body; nothing was captured"));
  }

  InFlightGuard guard(store_, merchant, key);
  co_await Sleep(decision.latency);
  const auto visibility_us = std::chrono::duration_cast<std::chrono::microseconds>(decision.visibility_delay).count();
  auto done = store_.CompleteCapture(merchant, key, capture, decision.decline_code, visibility_us);
  guard.Disarm();
  switch (done.outcome) {
    case CompleteOutcome::kCaptured: {
      std::string body;
      body.reserve(256);
      AppendCaptureJson(body, done.id, capture, key, done.created_at_us, 0, true);
      auto created_response = Created(std::move(body), done.id);
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
    co_return Answer(WithRetryAfter(
        decision.throttle ? Problem(Status::too_many_requests, "Too many requests", "rate limit exceeded")
                          : Problem(Status::service_unavailable, "Service unavailable", "temporary failure"),
        decision.retry_after_s));
  }
  co_await Sleep(decision.latency);
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
      co_return Answer(WithRetryAfter(
          lookup_decision.throttle ? Problem(Status::too_many_requests, "Too many requests", "rate limit exceeded")
                            : Problem(Status::service_unavailable, "Service unavailable", "temporary failure"),
          lookup_decision.retry_after_s));
    }
    co_await Sleep(lookup_decision.latency);
    auto found = store_.LookupByKey(merchant, *idempotency_key);
    auto lookup_response = found ? http::JsonResponse(Status::ok, CaptureJson(*found, false))
                          : NotFound("no capture with this idempotency_key");
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
    co_return Answer(WithRetryAfter(
        list_decision.throttle ? Problem(Status::too_many_requests, "Too many requests", "rate limit exceeded")
                          : Problem(Status::service_unavailable, "Service unavailable", "temporary failure"),
        list_decision.retry_after_s));
  }
  co_await Sleep(list_decision.latency);
  const auto page = store_.List(merchant, from_us, to_us, cursor, limit);
  std::string body = "{\"data\":[";
  for (const auto& capture : page.captures) {
    AppendCaptureJson(body, capture.id, capture.request, capture.idempotency_key, capture.created_at_us,
                      capture.voided_at_us, false);
    body += ',';
  }
  if (body.back() == ',') body.pop_back();
  body += "],\"next_page_token\":";
  body += page.next_cursor ? "\"" + PageToken(*page.next_cursor) + "\"" : std::string("null");
  body += '}';
  auto list_response = http::JsonResponse(Status::ok, std::move(body));
  co_return co_await Deliver(list_decision, std::move(list_response), "list");
}

asio::awaitable<Reply> AcquirerSim::HandleGetById(MerchantIndex merchant, std::string_view id) {
  const FaultDecision decision = faults_.Draw(kOpLookup);
  if (decision.throttle || decision.error) {
    co_return Answer(WithRetryAfter(
        decision.throttle ? Problem(Status::too_many_requests, "Too many requests", "rate limit exceeded")
                          : Problem(Status::service_unavailable, "Service unavailable", "temporary failure"),
        decision.retry_after_s));
  }
  co_await Sleep(decision.latency);
  auto found = store_.LookupById(merchant, id);
  auto response =
      found ? http::JsonResponse(Status::ok, CaptureJson(*found, false)) : NotFound("no capture with this id");
  co_return co_await Deliver(decision, std::move(response), "lookup");
}

asio::awaitable<Reply> AcquirerSim::HandleVoid(const http::Request& request, MerchantIndex merchant,
                                               std::string_view id) {
  const std::string_view key = request["Idempotency-Key"];
  if (!IsValidIdempotencyKey(key)) {
    co_return Answer(FieldError("Idempotency-Key", "the Idempotency-Key header is required: 1 to 255 visible ASCII characters"));
  }
  const FaultDecision decision = faults_.Draw(kOpVoid);
  if (decision.throttle || decision.error) {
    co_return Answer(WithRetryAfter(
        decision.throttle ? Problem(Status::too_many_requests, "Too many requests", "rate limit exceeded; nothing was voided")
                          : Problem(Status::service_unavailable, "Service unavailable", "temporary failure; nothing was voided"),
        decision.retry_after_s));
  }
  co_await Sleep(decision.latency);
  const auto result = store_.Void(merchant, key, id);
  Response response;
  switch (result.outcome) {
    case VoidOutcome::kVoided:
    case VoidOutcome::kAlreadyVoided: {
      std::string body = "{";
      AppendField(body, "id", result.capture->id);
      AppendField(body, "status", "voided");
      AppendTimeField(body, "voided_at", result.capture->voided_at_us);
      body.back() = '}';
      response = http::JsonResponse(Status::ok, std::move(body));
      break;
    }
    case VoidOutcome::kNotFound:
      co_return Answer(NotFound("no capture with this id"));
    case VoidOutcome::kMismatch:
      co_return Answer(Problem(Status::unprocessable_entity, "Idempotency key reused",
                               "this Idempotency-Key was used to void another capture; nothing was voided"));
    case VoidOutcome::kStorageFailed:
      co_return Answer(StorageUnavailable());
  }
  co_return co_await Deliver(decision, std::move(response), "void");
}

Response AcquirerSim::PutFaults(const http::Request& request) {
  auto parsed = ParseFaultProfileText(request.body(), faults_.Get().seed);
  if (!parsed) {
    json::object extra;
    extra["field"] = parsed.error().field;
    return Problem(Status::bad_request, "Invalid fault profile",
                   parsed.error().field.empty() ? parsed.error().problem
                                                : parsed.error().field + ": " + parsed.error().problem,
                   extra);
  }
  faults_.Set(*parsed);
  spdlog::info("fault profile set: {}", json::serialize(FaultProfileToJson(*parsed)));
  return http::JsonResponse(Status::ok, FaultProfileToJson(*parsed));
}

Response AcquirerSim::Ledger() const {
  const auto entries = store_.Ledger();
  std::string body;
  body.reserve(64 + entries.size() * 300);
  body += "{\"entries\":[";
  for (const auto& entry : entries) {
    body += '{';
    AppendField(body, "type", entry.type == RecordType::kVoid ? "void" : "capture");
    AppendField(body, "id", entry.capture.id);
    AppendField(body, "idempotency_key", entry.idempotency_key);
    AppendField(body, "reference", entry.capture.request.reference);
    AppendIntegerField(body, "amount", entry.capture.request.amount);
    AppendField(body, "currency", entry.capture.request.currency);
    AppendTimeField(body, "created_at", entry.at_us);
    AppendField(body, "merchant", store_.MerchantId(entry.capture.merchant));
    body.back() = '}';
    body += ',';
  }
  if (body.back() == ',') body.pop_back();
  body += "]}";
  return http::JsonResponse(Status::ok, std::move(body));
}

Response AcquirerSim::Reset() {
  if (!store_.Reset()) return StorageUnavailable();
  faults_.Reset();
  for (auto& count : requests_) count = 0;
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
