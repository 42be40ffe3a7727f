// docs/openapi.yaml against the running API, property-based (issue 14, defect 10): requests generated from
// the document's own schemas, with a seeded PRNG, drive the real charge-api (PostgreSQL, acquirer-sim):
//   valid      every parameter and body conforming (each currency of the enum in turn, lengths and amounts
//              at their bounds, optional members present and absent, Unicode text, raw and \u-escaped
//              JSON): the answer is a documented status and never a refusal of the input (400, 413, 415,
//              422);
//   invalid    exactly one constraint broken (a type, a bound, a length, a pattern, the enum, a required
//              member or header, an unknown member, the JSON itself, the media type, the API key): a
//              documented 4xx, problem+json;
//   undeclared a method the path does not declare: 405 with Allow naming the declared ones;
// and every answer's status, media type, body (the document's response schema, openapi_schema.hpp) and
// documented headers are checked against the document. Each request is first checked against the document
// by the same validator, so a "valid" request is valid and an "invalid" one breaks a constraint.
//
// OPENAPI_PROPERTY_REQUESTS (default 2000) sets the size; OPENAPI_PROPERTY_SEED replays a run (the seed
// is printed). tests/README.md has the long form.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <iostream>
#include <map>
#include <random>
#include <set>
#include <sstream>

#include "charge_stack.hpp"
#include "http_test_client.hpp"
#include "openapi_schema.hpp"
#include "pg_test_database.hpp"
#include "service_process.hpp"
#include "test_env.hpp"

namespace charge_outbox::testing {
namespace {

namespace fs = std::filesystem;
namespace json = boost::json;
namespace bhttp = boost::beast::http;
using namespace std::chrono_literals;

constexpr const char* kMerchant = "00000000-0000-4000-8000-0000000000f1";
constexpr const char* kApiKey = "sk_test_openapi_property";
constexpr const char* kAcquirerKey = "ak_test_openapi_property";

// charge-api's header-section limit (http::ServerOptions::header_limit), as docs/openapi.yaml's 431 says.
constexpr std::size_t kHeaderLimit = 8 * 1024;

std::size_t EnvSize(const char* name, std::size_t fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? static_cast<std::size_t>(std::stoull(v)) : fallback;
}

// ---------------------------------------------------------------------------------------------- text

// Code points the generators draw from: all of ASCII and Latin-1 (controls included), and text from
// further out: 2-, 3- and 4-byte UTF-8, a combining mark, separators and noncharacters a parser may trip on.
const std::vector<char32_t>& Candidates() {
  static const std::vector<char32_t> all = [] {
    std::vector<char32_t> v;
    for (char32_t c = 0; c < 0x100; ++c) v.push_back(c);
    for (char32_t c : {0x0394u, 0x0416u, 0x05D0u, 0x0627u, 0x0301u, 0x200Bu, 0x2028u, 0x2029u, 0x20ACu, 0x4E2Du,
                       0x6587u, 0xAC00u, 0xFEFFu, 0xFFFDu, 0xFFFEu, 0xFFFFu, 0x10348u, 0x1D11Eu, 0x1F600u,
                       0x1F4B3u, 0x10FFFDu}) {
      v.push_back(c);
    }
    return v;
  }();
  return all;
}

bool IsAstral(char32_t c) { return c >= 0x10000; }

std::string EscapeForReport(std::string_view s, std::size_t max = 400) {
  std::string out;
  for (const char ch : s.substr(0, max)) {
    const auto c = static_cast<unsigned char>(ch);
    if (c < 0x20 || c == 0x7F) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02X", c);
      out += buf;
    } else {
      out += ch;
    }
  }
  if (s.size() > max) out += "...(" + std::to_string(s.size()) + " bytes)";
  return out;
}

std::string PercentEncode(std::string_view s) {
  std::string out;
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~') {
      out += ch;
    } else {
      char buf[4];
      std::snprintf(buf, sizeof buf, "%%%02X", c);
      out += buf;
    }
  }
  return out;
}

// JSON text of `v`. `ascii` escapes every non-ASCII character as \uXXXX (a surrogate pair above the BMP),
// as Python's json.dumps does by default: the same value, up to six times the bytes.
void WriteJson(const json::value& v, bool ascii, std::string& out) {
  if (v.is_object()) {
    out += '{';
    bool first = true;
    for (const auto& m : v.get_object()) {
      if (!first) out += ", ";
      first = false;
      WriteJson(json::value(m.key()), ascii, out);
      out += ": ";
      WriteJson(m.value(), ascii, out);
    }
    out += '}';
  } else if (v.is_array()) {
    out += '[';
    bool first = true;
    for (const auto& e : v.get_array()) {
      if (!first) out += ", ";
      first = false;
      WriteJson(e, ascii, out);
    }
    out += ']';
  } else if (v.is_string() && ascii) {
    const std::string_view s = v.get_string();
    out += '"';
    for (std::size_t i = 0; i < s.size();) {
      const auto c = static_cast<unsigned char>(s[i]);
      std::uint32_t cp = c;
      std::size_t n = 1;
      if (c >= 0xF0) {
        cp = c & 0x07u;
        n = 4;
      } else if (c >= 0xE0) {
        cp = c & 0x0Fu;
        n = 3;
      } else if (c >= 0xC0) {
        cp = c & 0x1Fu;
        n = 2;
      }
      for (std::size_t k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3Fu);
      i += n;
      char buf[16];
      if (cp == '"' || cp == '\\') {
        out += '\\';
        out += static_cast<char>(cp);
      } else if (cp >= 0x20 && cp < 0x7F) {
        out += static_cast<char>(cp);
      } else if (cp < 0x10000) {
        std::snprintf(buf, sizeof buf, "\\u%04x", cp);
        out += buf;
      } else {
        const auto u = cp - 0x10000;
        std::snprintf(buf, sizeof buf, "\\u%04x\\u%04x", 0xD800 + (u >> 10), 0xDC00 + (u & 0x3FF));
        out += buf;
      }
    }
    out += '"';
  } else {
    out += json::serialize(v);
  }
}

std::string JsonText(const json::value& v, bool ascii) {
  std::string out;
  WriteJson(v, ascii, out);
  return out;
}

// ---------------------------------------------------------------------------------------------- HTTP

struct Request {
  std::string method;
  std::string target;
  std::string body;
  HttpHeaders headers;  // exactly what is sent (no Content-Type is added)
  std::string what;     // what the request keeps or breaks, for the report
};

struct Answer {
  std::string error;  // empty when a response was read
  unsigned status = 0;
  std::map<std::string, std::string> headers;  // lower-case names
  std::string body;
  std::string header(const std::string& name) const {
    const auto it = headers.find(name);
    return it == headers.end() ? std::string() : it->second;
  }
  bool has(const std::string& name) const { return headers.contains(name); }
};

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

std::string Wire(const Request& r) {
  std::string out = r.method + " " + r.target + " HTTP/1.1\r\nHost: 127.0.0.1\r\n";
  for (const auto& [name, value] : r.headers) out += name + ": " + value + "\r\n";
  if (!r.body.empty() || r.method == "POST") out += "Content-Length: " + std::to_string(r.body.size()) + "\r\n";
  out += "\r\n" + r.body;
  return out;
}

std::string Describe(const Request& r) {
  std::string out = r.what + "\n      " + r.method + " " + EscapeForReport(r.target);
  for (const auto& [name, value] : r.headers) out += "\n      " + name + ": " + EscapeForReport(value, 120);
  if (!r.body.empty()) out += "\n      " + EscapeForReport(r.body);
  return out;
}

template <class Message>
void CopyHeaders(const Message& m, Answer& a) {
  for (const auto& field : m) a.headers[Lower(std::string(field.name_string()))] = std::string(field.value());
}

// One exchange on the kept-alive connection (HEAD on a connection of its own: its answer has no body to read).
Answer Exchange(HttpTestClient& client, std::uint16_t port, const Request& r) {
  Answer a;
  if (r.method == "HEAD") {
    try {
      boost::asio::io_context ioc;
      boost::asio::ip::tcp::socket socket(ioc);
      socket.connect({boost::asio::ip::make_address("127.0.0.1"), port});
      boost::asio::write(socket, boost::asio::buffer(Wire(r)));
      boost::beast::flat_buffer buffer;
      bhttp::response_parser<bhttp::empty_body> parser;
      parser.skip(true);
      bhttp::read(socket, buffer, parser);
      a.status = parser.get().result_int();
      CopyHeaders(parser.get(), a);
    } catch (const std::exception& e) {
      a.error = e.what();
    }
    return a;
  }
  const auto result = client.SendRaw(Wire(r));
  if (!result.ok()) {
    a.error = result.error.message();
    return a;
  }
  a.status = result.status();
  CopyHeaders(result.response, a);
  a.body = result.response.body();
  return a;
}

// ---------------------------------------------------------------------------------------------- the run

struct Operation {
  std::string method;  // upper case
  std::string path;    // as in the document ("/v1/charges/{id}")
  YAML::Node node;
};

enum class Kind { kValid, kInvalid, kUndeclared, kReplay, kReuse };
const char* KindName(Kind k) {
  switch (k) {
    case Kind::kValid: return "valid";
    case Kind::kInvalid: return "invalid";
    case Kind::kUndeclared: return "undeclared-method";
    case Kind::kReplay: return "replay";
    case Kind::kReuse: return "key-reused";
  }
  return "?";
}

class OpenApiPropertyE2E : public ::testing::Test {
 protected:
  void SetUp() override {
    db_ = PgTestDatabase::Create("openapi_property", PgTestDatabase::Schema::kMigrated);
    InsertMerchant(*db_, kMerchant, kApiKey);
    dir_ = fs::temp_directory_path() / UniqueName("openapi_property_e2e");
    sim_ = std::make_unique<ServiceProcess>(std::vector<std::string>{ACQUIRER_SIM_BIN},
                                            EnvChanges{{"HTTP_PORT", "0"},
                                                       {"DATA_DIR", (dir_ / "sim").string()},
                                                       {"AUTH_API_KEYS", kAcquirerKey}});
    auto env = FastChargeApiEnv(db_->url(), sim_->port(), kAcquirerKey);
    // Neither limit is under test here: thousands of requests from one merchant and hundreds of unknown
    // keys from one client must meet the API's answers, not its defences (hostile_clients_e2etest has those).
    env["RATE_LIMIT_PER_MERCHANT_RATE"] = "1000000";
    env["RATE_LIMIT_PER_MERCHANT_BURST"] = "1000000";
    env["AUTH_FAILED_LIMIT_RATE"] = "1000000";
    env["AUTH_FAILED_LIMIT_BURST"] = "1000000";
    api_ = std::make_unique<ServiceProcess>(std::vector<std::string>{CHARGE_API_BIN}, env);
    // Declines (402, PaymentProblem) and acquirer errors (202 pending, or 402 failed) among the captures,
    // so that every answer POST documents is met and checked.
    const auto faults = HttpTestClient(sim_->port()).Put("/admin/faults", R"({"decline_rate": 0.15, "error_rate": 0.05})");
    ASSERT_EQ(faults.status(), 200u) << faults.response.body();
  }

  void TearDown() override {
    api_.reset();
    sim_.reset();
    fs::remove_all(dir_);
  }

  std::unique_ptr<PgTestDatabase> db_;
  fs::path dir_;
  std::unique_ptr<ServiceProcess> sim_;
  std::unique_ptr<ServiceProcess> api_;
};

class PropertyRun {
 public:
  PropertyRun(const OpenApiDocument& doc, std::uint64_t seed, std::uint16_t port)
      : doc_(doc), rng_(seed), port_(port), client_(port, "127.0.0.1", 30s) {
    for (const auto& path : doc_.root()["paths"]) {
      std::set<std::string> methods;
      for (const auto& op : path.second) {
        auto method = op.first.as<std::string>();
        std::transform(method.begin(), method.end(), method.begin(),
                       [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
        methods.insert(method);
        ops_.push_back(Operation{method, path.first.as<std::string>(), op.second});
      }
      declared_[path.first.as<std::string>()] = methods;
    }
  }

  void Run(std::size_t requests) {
    for (std::size_t i = 0; i < requests; ++i) {
      const auto roll = Uniform(0, 99);
      const Operation& op = ops_[static_cast<std::size_t>(Uniform(0, static_cast<int>(ops_.size()) - 1))];
      if (roll < 8) {
        Undeclared();
      } else if (roll < 12 && !posted_.empty() && op.method == "POST") {
        Replay(op, roll < 10);
      } else if (roll < 55) {
        Send(op, Valid(op), Kind::kValid);
      } else {
        Send(op, Invalid(op), Kind::kInvalid);
      }
    }
  }

  std::size_t sent() const { return sent_; }
  const std::map<std::string, std::size_t>& tally() const { return tally_; }
  // One line per distinct disagreement, with its first example and how often it happened.
  std::vector<std::string> Mismatches() const {
    std::vector<std::string> out;
    for (const auto& [key, m] : mismatches_) out.push_back(key + "  (x" + std::to_string(m.second) + ")\n    " + m.first);
    return out;
  }

 private:
  struct PostedCharge {
    Request request;
    Answer first;
    json::value body;
  };

  int Uniform(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  std::int64_t Uniform64(std::int64_t lo, std::int64_t hi) {
    return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng_);
  }
  bool Chance(int percent) { return Uniform(0, 99) < percent; }
  template <class T>
  const T& Pick(const std::vector<T>& v) {
    return v[static_cast<std::size_t>(Uniform(0, static_cast<int>(v.size()) - 1))];
  }

  void Mismatch(const std::string& key, const Request& r, const Answer& a, const std::string& detail) {
    auto& slot = mismatches_[key];
    if (slot.second++ == 0) {
      slot.first = Describe(r) + "\n    -> " + (a.error.empty() ? std::to_string(a.status) : "no answer: " + a.error) +
                   " " + a.header("content-type") + " " + EscapeForReport(a.body, 300) +
                   (detail.empty() ? "" : "\n    " + detail);
    }
  }

  // -------------------------------------------------------------------------------- strings

  // The candidates that `pattern` accepts as a one-character string: the document's patterns on text are
  // one character class repeated; a pattern with literals (the charge id) accepts none and has its own.
  const std::vector<char32_t>& Allowed(const std::string& pattern) {
    auto& allowed = allowed_[pattern];
    if (allowed.empty()) {
      for (const char32_t c : Candidates()) {
        const auto s = Utf8(c);
        if (pattern.empty() || std::regex_search(s, doc_.Pattern(pattern))) allowed.push_back(c);
      }
    }
    return allowed;
  }

  std::string Text(const std::vector<char32_t>& pool, std::size_t length) {
    // A mix: mostly ASCII, sometimes any candidate, sometimes 4-byte characters throughout.
    std::vector<char32_t> ascii, astral;
    for (const char32_t c : pool) {
      if (c >= 0x20 && c < 0x7F) ascii.push_back(c);
      if (IsAstral(c)) astral.push_back(c);
    }
    const int style = Uniform(0, 2);
    std::string out;
    for (std::size_t i = 0; i < length; ++i) {
      const auto& from = style == 0 && !ascii.empty() ? ascii : style == 2 && !astral.empty() && Chance(85) ? astral : pool;
      out += Utf8(Pick(from));
    }
    return out;
  }

  std::size_t Length(const YAML::Node& schema, std::size_t unbounded_max) {
    const std::size_t lo = schema["minLength"] ? schema["minLength"].as<std::size_t>() : 0;
    const std::size_t hi = schema["maxLength"] ? schema["maxLength"].as<std::size_t>() : unbounded_max;
    switch (Uniform(0, 5)) {
      case 0: return lo;
      case 1: return hi;
      case 2: return std::min(hi, lo + 1);
      case 3: return hi > lo ? hi - 1 : hi;
      case 4: return static_cast<std::size_t>(Uniform64(static_cast<std::int64_t>(lo),
                                                        static_cast<std::int64_t>(std::min(hi, lo + 16))));
      default: return static_cast<std::size_t>(Uniform64(static_cast<std::int64_t>(lo), static_cast<std::int64_t>(hi)));
    }
  }

  // `where` names the value ("body.currency", "header Idempotency-Key"): enums are walked in turn per name.
  std::string ValidString(const YAML::Node& schema, const std::string& where, bool in_header) {
    if (const auto e = schema["enum"]) {
      auto& next = cycle_[where];
      return e[next++ % e.size()].as<std::string>();
    }
    const std::string pattern = schema["pattern"] ? schema["pattern"].as<std::string>() : "";
    if (pattern == "^ch_[0-9a-f]{32}$") return RandomChargeId();
    auto pool = Allowed(pattern);
    if (in_header) {  // a field value: visible ASCII and inner spaces (what an HTTP client can send)
      std::erase_if(pool, [](char32_t c) { return c < 0x21 || c > 0x7E; });
    }
    if (pool.empty()) throw std::runtime_error(where + ": no generator for pattern " + pattern);
    return Text(pool, Length(schema, in_header ? 200 : 64));
  }

  std::string RandomChargeId() {
    static constexpr char kHex[] = "0123456789abcdef";
    std::string id = "ch_";
    for (int i = 0; i < 32; ++i) id += kHex[Uniform(0, 15)];
    return id;
  }

  // -------------------------------------------------------------------------------- values

  json::value ValidValue(const YAML::Node& raw, const std::string& where) {
    const auto schema = doc_.Resolve(raw);
    const auto type = schema["type"];
    bool nullable = false;
    std::string t;
    if (type && type.IsSequence()) {
      for (const auto& x : type) {
        if (x.as<std::string>() == "null") nullable = true;
        else t = x.as<std::string>();
      }
    } else if (type) {
      t = type.as<std::string>();
    }
    if (nullable && Chance(15)) return nullptr;
    if (t == "integer") {
      const std::int64_t lo = schema["minimum"] ? schema["minimum"].as<std::int64_t>() : -1'000'000;
      const std::int64_t hi = schema["maximum"] ? schema["maximum"].as<std::int64_t>() : 1'000'000;
      std::int64_t n = 0;
      switch (Uniform(0, 4)) {
        case 0: n = lo; break;
        case 1: n = hi; break;
        case 2: n = Uniform64(lo, std::min(hi, lo + 100'000)); break;
        default: n = Uniform64(lo, hi); break;
      }
      // Now and then written as a number with a fraction of zero (649.0, 6.49E2): an integer all the same.
      if (Chance(10)) return static_cast<double>(n);
      return n;
    }
    if (t == "string") return json::value(ValidString(schema, where, false));
    if (t == "object") {
      json::object o;
      std::set<std::string> required;
      if (const auto rs = schema["required"]) {
        for (const auto& r : rs) required.insert(r.as<std::string>());
      }
      for (const auto& p : schema["properties"]) {
        const auto name = p.first.as<std::string>();
        if (required.contains(name) || Chance(50)) o[name] = ValidValue(p.second, where + "." + name);
      }
      return o;
    }
    throw std::runtime_error(where + ": no generator for type " + t);
  }

  // A value of another JSON type than `schema` allows.
  json::value WrongType(const YAML::Node& schema) {
    std::vector<json::value> options = {json::value(42), json::value(1.5), json::value(true), json::value(nullptr),
                                        json::value("12"), json::array{1, 2}, json::object{{"k", "v"}}};
    while (true) {
      auto v = Pick(options);
      if (!doc_.Validate(schema, v).empty()) return v;
    }
  }

  // Breaks exactly one constraint of a scalar `schema`; `what` says which.
  json::value InvalidValue(const YAML::Node& raw, std::string& what) {
    const auto schema = doc_.Resolve(raw);
    std::vector<std::function<json::value()>> ways;
    ways.push_back([&] { what = "wrong type"; return WrongType(schema); });
    if (const auto e = schema["enum"]) {
      ways.push_back([&, e] {
        what = "not in the enum";
        const std::vector<std::string> outside = {"AAA", "XXX", "XTS", "XAU", "XDR", "CLF", "usd", "Eur", "ZZZ", "BRL ", "",
                                                  "EURO", "US", "€", "BR\u00a3"};
        std::string v;
        do v = Pick(outside); while (!doc_.Validate(schema, json::value(v)).size());
        return json::value(v);
      });
    }
    if (const auto m = schema["minimum"]) {
      ways.push_back([&, m] { what = "below minimum"; return json::value(m.as<std::int64_t>() - Uniform(1, 3)); });
    }
    if (const auto m = schema["maximum"]) {
      ways.push_back([&, m] {
        what = "above maximum";
        return Chance(50) ? json::value(m.as<std::int64_t>() + 1) : json::value(std::uint64_t{18446744073709551615u});
      });
    }
    const std::string pattern = schema["pattern"] ? schema["pattern"].as<std::string>() : "";
    if (schema["type"] && schema["type"].IsScalar() && schema["type"].as<std::string>() == "string" &&
        !schema["enum"]) {
      // A pattern of literals (the charge id) allows no single character: break it with any text.
      const auto& pool = Allowed(pattern).empty() ? Allowed("^[\\x21-\\x7E]+$") : Allowed(pattern);
      if (const auto m = schema["maxLength"]) {
        ways.push_back([&, m] {
          what = "longer than maxLength";
          return json::value(Text(pool, m.as<std::size_t>() + static_cast<std::size_t>(Uniform(1, 3))));
        });
      }
      if (const auto m = schema["minLength"]; m && m.as<std::size_t>() > 0) {
        ways.push_back([&] { what = "shorter than minLength"; return json::value(""); });
      }
      if (!pattern.empty()) {
        ways.push_back([&] {
          what = "does not match the pattern";
          std::vector<char32_t> refused;
          for (const char32_t c : Candidates()) {
            if (std::find(pool.begin(), pool.end(), c) == pool.end()) refused.push_back(c);
          }
          const std::size_t hi = schema["maxLength"] ? schema["maxLength"].as<std::size_t>() - 1 : 20;
          auto text = Text(pool, static_cast<std::size_t>(Uniform(0, static_cast<int>(std::min<std::size_t>(hi, 20)))));
          const auto at = static_cast<std::size_t>(Uniform(0, static_cast<int>(CodePointCount(text))));
          std::size_t byte = 0;
          for (std::size_t k = 0; k < at; ++k) {
            do ++byte; while (byte < text.size() && (static_cast<unsigned char>(text[byte]) & 0xC0u) == 0x80u);
          }
          text.insert(std::min(byte, text.size()), Utf8(Pick(refused)));
          if (doc_.Validate(schema, json::value(text)).empty()) text = "\x01" + text;  // "ch_" and hex digits
          return json::value(text);
        });
      }
    }
    return Pick(ways)();
  }

  // -------------------------------------------------------------------------------- requests

  std::vector<YAML::Node> Parameters(const Operation& op) {
    std::vector<YAML::Node> out;
    if (const auto ps = op.node["parameters"]) {
      for (const auto& p : ps) out.push_back(doc_.Resolve(p));
    }
    return out;
  }

  static std::string HeaderOf(const Request& r, const std::string& name) {
    for (const auto& [n, v] : r.headers) {
      if (n == name) return v;
    }
    return "";
  }

  // A field value the parser keeps as sent: no line break, no whitespace at either end (which it trims).
  static bool FitsInAHeader(std::string_view v) {
    if (v.find_first_of("\r\n") != std::string_view::npos) return false;
    return v.empty() || (v.front() != ' ' && v.front() != '\t' && v.back() != ' ' && v.back() != '\t');
  }

  std::string Bearer() {
    static const std::vector<std::string> schemes = {"Bearer", "bearer", "BEARER"};
    return Pick(schemes) + " " + kApiKey;
  }

  // The request with every parameter, the body and the key valid; `values` receives what was generated.
  Request Valid(const Operation& op, std::map<std::string, std::string>* params_out = nullptr,
                json::value* body_out = nullptr) {
    Request r{op.method, op.path, "", {}, ""};
    r.headers.emplace_back("Authorization", Bearer());
    std::string query;
    for (const auto& p : Parameters(op)) {
      const auto name = p["name"].as<std::string>();
      const auto in = p["in"].as<std::string>();
      const bool required = p["required"] && p["required"].as<bool>();
      if (!required && Chance(50)) continue;
      std::string value;
      if (name == "Idempotency-Key" && op.method == "POST") {
        value = FreshKey(p["schema"]);
      } else if (name == "idempotency_key" && !posted_.empty() && Chance(40)) {
        value = HeaderOf(Pick(posted_).request, "Idempotency-Key");
      } else if (name == "id" && !charge_ids_.empty() && Chance(40)) {
        value = Pick(charge_ids_);
      } else if (name == "traceparent" && Chance(50)) {
        value = "00-" + RandomChargeId().substr(3) + "-" + RandomChargeId().substr(3, 16) + "-01";
      } else if (name == "traceparent" && Chance(4)) {
        value = std::string(static_cast<std::size_t>(Uniform(8000, 9000)), 'f');  // unbounded, as the schema allows
      } else {
        value = ValidString(doc_.Resolve(p["schema"]), in + " " + name, in == "header");
      }
      if (params_out != nullptr) (*params_out)[name] = value;
      if (in == "header") r.headers.emplace_back(name, value);
      if (in == "query") query += (query.empty() ? "?" : "&") + name + "=" + PercentEncode(value);
      if (in == "path") r.target.replace(r.target.find("{" + name + "}"), name.size() + 2, PercentEncode(value));
    }
    r.target += query;
    if (const auto body = op.node["requestBody"]) {
      const auto content = body["content"];
      const auto media = content.begin()->first.as<std::string>();
      const auto value = ValidValue(content.begin()->second["schema"], "body");
      const bool ascii = Chance(50);
      r.body = JsonText(value, ascii);
      r.headers.emplace_back("Content-Type", Chance(80) ? media : media + "; charset=utf-8");
      r.what = ascii ? "\\u-escaped JSON" : "UTF-8 JSON";
      if (body_out != nullptr) *body_out = value;
      if (auto errors = doc_.Validate(content.begin()->second["schema"], value); !errors.empty()) {
        throw std::runtime_error("generator bug: a valid body breaks " + errors.front());
      }
    }
    return r;
  }

  std::string FreshKey(const YAML::Node& schema) {
    for (int tries = 0; tries < 100; ++tries) {
      auto key = ValidString(doc_.Resolve(schema), "key", true);
      if (!doc_.Validate(schema, json::value(key), "key").empty()) throw std::runtime_error("generator bug: key " + key);
      if (used_keys_.insert(key).second) return key;
    }
    return "k" + std::to_string(used_keys_.size()) + "-" + RandomChargeId();
  }

  Request Invalid(const Operation& op) {
    std::map<std::string, std::string> params;
    json::value body;
    Request r = Valid(op, &params, &body);
    // One broken constraint at a time: not also a header section past the limit (431).
    std::erase_if(r.headers, [](const auto& h) { return h.first == "traceparent" && h.second.size() > 1024; });
    const auto rewrite = [&](const json::value& v) { r.body = JsonText(v, Chance(50)); };
    std::vector<std::function<void()>> ways;
    // Authentication.
    ways.push_back([&] { r.what = "no Authorization"; std::erase_if(r.headers, [](auto& h) { return h.first == "Authorization"; }); });
    ways.push_back([&] { r.what = "unknown API key"; r.headers[0].second = "Bearer sk_unknown_" + RandomChargeId(); });
    ways.push_back([&] { r.what = "not a bearer credential"; r.headers[0].second = Chance(50) ? "Basic c2s6eA==" : "Bearer"; });
    // Every parameter: missing if required, or one constraint broken.
    for (const auto& p : Parameters(op)) {
      const auto name = p["name"].as<std::string>();
      const auto in = p["in"].as<std::string>();
      const auto schema = doc_.Resolve(p["schema"]);
      const bool required = p["required"] && p["required"].as<bool>();
      if (required && in != "path") {
        ways.push_back([&, name, in] {
          r.what = "required " + in + " " + name + " missing";
          if (in == "header") std::erase_if(r.headers, [&](auto& h) { return h.first == name; });
          if (in == "query") r.target = r.target.substr(0, r.target.find('?'));
        });
      }
      if (schema["minLength"] || schema["maxLength"] || schema["pattern"]) {
        ways.push_back([&, name, in, schema] {
          std::string broken;
          json::value v;
          do {
            v = InvalidValue(schema, broken);
          } while (!v.is_string() || (in == "header" && !FitsInAHeader(v.get_string())));
          const std::string value(v.get_string());
          r.what = in + " " + name + " " + broken;
          if (in == "header") {
            for (auto& h : r.headers) {
              if (h.first == name) h.second = value;
            }
            if (params.find(name) == params.end()) r.headers.emplace_back(name, value);
          }
          // Now and then bytes that are not UTF-8 once decoded (%FF): echoed back, they would break the JSON.
          const auto encoded = PercentEncode(value) + (Chance(15) ? "%FF%C3%28" : "");
          if (in == "query") r.target = r.target.substr(0, r.target.find('?')) + "?" + name + "=" + encoded;
          if (in == "path") {
            const auto at = op.path.find("{" + name + "}");
            r.target = op.path.substr(0, at) + encoded + op.path.substr(at + name.size() + 2);
          }
        });
      }
    }
    if (const auto rb = op.node["requestBody"]) {
      const auto schema = doc_.Resolve(rb["content"].begin()->second["schema"]);
      for (const auto& p : schema["properties"]) {
        const auto name = p.first.as<std::string>();
        ways.push_back([&, name, p] {
          std::string broken;
          auto v = body.as_object();
          v[name] = InvalidValue(p.second, broken);
          r.what = "body." + name + " " + broken;
          rewrite(v);
        });
      }
      for (const auto& req : schema["required"]) {
        const auto name = req.as<std::string>();
        ways.push_back([&, name] {
          auto v = body.as_object();
          v.erase(name);
          r.what = "body." + name + " (required) missing";
          rewrite(v);
        });
      }
      if (schema["additionalProperties"] && !schema["additionalProperties"].as<bool>()) {
        ways.push_back([&] {
          auto v = body.as_object();
          static const std::vector<std::string> extra = {"metadata", "capture", "Amount", "amount ", "x"};
          v[Pick(extra)] = Chance(50) ? json::value("y") : json::value(nullptr);
          r.what = "a member the schema does not allow";
          rewrite(v);
        });
      }
      ways.push_back([&] {
        static const std::vector<std::string> broken = {
            "", "{", "{\"amount\": 100,", "[]", "\"charge\"", "null", "42", "{\"amount\": 100}}",
            "{\"amount\": 100, \"currency\": \"BRL\", \"order_id\": \"o\", \"payment_method\": \"pm\",}",
            "{\"amount\": 100, \"currency\": \"BRL\", \"order_id\": \"o\xff\", \"payment_method\": \"pm\"}",
            "{\"amount\": 100, \"currency\": \"BRL\", \"order_id\": \"\\ud800\", \"payment_method\": \"pm\"}",
            "{\"amount\": {\"value\": 100}, \"currency\": \"BRL\", \"order_id\": \"o\", \"payment_method\": \"pm\"}",
            "{'amount': 100}"};
        r.body = Pick(broken);
        r.what = "not a JSON object of the schema";
      });
      ways.push_back([&] {
        // Larger than any body the schema allows could be, even \u-escaped: refused before it is read.
        auto v = body.as_object();
        v["description"] = std::string(static_cast<std::size_t>(Uniform(16 * 1024, 40 * 1024)), 'd');
        r.body = JsonText(v, false);
        r.what = "body larger than the 16 KiB limit";
      });
      ways.push_back([&] {
        static const std::vector<std::string> types = {"text/plain", "application/xml", "application/x-www-form-urlencoded",
                                                       "application/jsonx", "json", "multipart/form-data; boundary=x"};
        r.what = "wrong media type";
        if (Chance(20)) {
          std::erase_if(r.headers, [](auto& h) { return h.first == "Content-Type"; });
        } else {
          for (auto& h : r.headers) {
            if (h.first == "Content-Type") h.second = Pick(types);
          }
        }
      });
    }
    Pick(ways)();
    // The claim checked: the body breaks the schema (when that was what changed).
    if (r.what.starts_with("body.") || r.what.starts_with("a member")) {
      json::value v = json::parse(r.body);
      if (doc_.Validate(doc_.Resolve(op.node["requestBody"]["content"].begin()->second["schema"]), v).empty()) {
        throw std::runtime_error("generator bug: an invalid body conforms: " + r.body);
      }
    }
    return r;
  }

  void Undeclared() {
    static const std::vector<std::string> methods = {"GET",    "POST",    "PUT",   "PATCH", "DELETE",   "HEAD", "OPTIONS",
                                                     "TRACE",  "CONNECT", "BREW",  "PROPFIND", "get", "M-SEARCH"};
    const auto& [path, declared] = *std::next(declared_.begin(), Uniform(0, static_cast<int>(declared_.size()) - 1));
    std::string method;
    do method = Pick(methods); while (declared.contains(method));
    Request r{method, path, "", {{"Authorization", Bearer()}}, "a method " + path + " does not declare"};
    if (path.find('{') != std::string::npos) r.target = "/v1/charges/" + RandomChargeId();
    const auto a = Exchange(client_, port_, r);
    Count(path, method, Kind::kUndeclared, a);
    CheckUndeclared(r, a, declared);
  }

  void Replay(const Operation& op, bool same) {
    const auto& first = Pick(posted_);
    Request r = first.request;
    if (same) {
      r.what = "the same key and body again";
    } else {
      auto v = first.body.as_object();
      v["amount"] = v["amount"].to_number<double>() == 1 ? 2 : 1;
      r.body = JsonText(v, false);
      r.what = "the same key with another amount";
    }
    const auto a = Exchange(client_, port_, r);
    Count(op.path, op.method, same ? Kind::kReplay : Kind::kReuse, a);
    CheckAgainstDocument(op, r, a);
    if (same && (first.first.status == 201 || first.first.status == 402)) {
      if (a.status != first.first.status || a.header("idempotent-replayed") != "true") {
        Mismatch("replay: not the first answer with Idempotent-Replayed: true", r, a,
                 "first answer " + std::to_string(first.first.status));
      }
    }
    if (!same && a.status != 422) Mismatch("same key, other parameters: not 422", r, a, "");
  }

  void Send(const Operation& op, const Request& r, Kind kind) {
    const auto a = Exchange(client_, port_, r);
    Count(op.path, op.method, kind, a);
    CheckAgainstDocument(op, r, a);
    if (!a.error.empty()) return;
    if (kind == Kind::kValid) {
      // A header the schema leaves unbounded past the header-section limit: 431, as documented.
      if (a.status == 431 && Wire(r).find("\r\n\r\n") > kHeaderLimit) return;
      if (a.status >= 400 && a.status != 402 && a.status != 404) {
        boost::system::error_code ec;
        const auto problem = json::parse(a.body, ec);
        const auto* detail = !ec && problem.is_object() ? problem.as_object().if_contains("detail") : nullptr;
        const std::string why = detail != nullptr && detail->is_string() ? std::string(detail->get_string()) : "";
        Mismatch("valid " + op.method + " " + op.path + " refused " + std::to_string(a.status) + ": " + why, r, a, "");
      }
      if (op.method == "POST" && (a.status == 201 || a.status == 202 || a.status == 402)) {
        posted_.push_back(PostedCharge{r, a, json::parse(r.body)});
        if (a.status == 201 || a.status == 202) charge_ids_.push_back(std::string(json::parse(a.body).at("id").as_string()));
      }
    } else {
      const bool auth = r.what.find("Authorization") != std::string::npos || r.what.find("API key") != std::string::npos ||
                        r.what.find("bearer") != std::string::npos;
      unsigned expected = r.what == "wrong media type" ? 415 : auth ? 401 : 400;
      if (r.what.starts_with("body larger")) expected = 413;
      if (op.path.find('{') != std::string::npos && r.what.starts_with("path")) expected = 404;
      if (a.status != expected && !(auth && a.status == 429)) {
        Mismatch("invalid (" + r.what.substr(0, r.what.find(' ', r.what.find(' ') + 1)) + "...) on " + op.method +
                     " " + op.path + ": " + std::to_string(a.status) + " where " + std::to_string(expected) +
                     " was expected",
                 r, a, "");
      }
    }
  }

  void Count(const std::string& path, const std::string& method, Kind kind, const Answer& a) {
    ++sent_;
    ++tally_[method + " " + path + " " + KindName(kind) + " -> " + (a.error.empty() ? std::to_string(a.status) : "error")];
  }

  // -------------------------------------------------------------------------------- answers

  void CheckBody(const YAML::Node& response, const Request& r, const Answer& a, const std::string& label) {
    const auto content = response["content"];
    if (!content) return;
    const auto media = content.begin()->first.as<std::string>();
    auto got = a.header("content-type");
    got = Lower(got.substr(0, got.find(';')));
    if (got != media) {
      Mismatch(label + ": Content-Type " + got + " where " + media + " is documented", r, a, "");
      return;
    }
    if (r.method == "HEAD") return;
    boost::system::error_code ec;
    const auto body = json::parse(a.body, ec);
    if (ec) {
      Mismatch(label + ": body is not JSON (" + ec.message() + ")", r, a, "");
      return;
    }
    if (const auto errors = doc_.Validate(content.begin()->second["schema"], body, "response"); !errors.empty()) {
      Mismatch(label + ": body breaks the documented schema: " + errors.front(), r, a, "");
    }
  }

  void CheckHeaders(const YAML::Node& response, const Request& r, const Answer& a, const std::string& label) {
    const auto headers = response["headers"];
    if (!headers) return;
    for (const auto& h : headers) {
      const auto name = h.first.as<std::string>();
      const auto header = doc_.Resolve(h.second);
      const bool required = header["required"] && header["required"].as<bool>();
      if (!a.has(Lower(name))) {
        if (required) Mismatch(label + ": required header " + name + " missing", r, a, "");
        continue;
      }
      const auto value = a.header(Lower(name));
      const auto schema = doc_.Resolve(header["schema"]);
      json::value v(value);
      if (schema["type"] && schema["type"].as<std::string>() == "integer") {
        try {
          std::size_t used = 0;
          v = std::stoll(value, &used);
          if (used != value.size()) v = value;
        } catch (const std::exception&) {
        }
      }
      if (const auto errors = doc_.Validate(schema, v, name); !errors.empty()) {
        Mismatch(label + ": header " + errors.front(), r, a, "");
      }
    }
  }

  // Status documented for the operation, media type, body and headers as documented. A few headers the
  // server always sends with a status must be documented as required (Schemathesis checks those).
  void CheckAgainstDocument(const Operation& op, const Request& r, const Answer& a) {
    const auto label = op.method + " " + op.path + " " + std::to_string(a.status);
    if (!a.error.empty()) {
      Mismatch(op.method + " " + op.path + ": no answer", r, a, "");
      return;
    }
    const auto documented = op.node["responses"][std::to_string(a.status)];
    if (!documented) {
      Mismatch(label + ": status not documented for the operation", r, a, "");
      return;
    }
    const auto response = doc_.Resolve(documented);
    CheckBody(response, r, a, label);
    CheckHeaders(response, r, a, label);
    for (const auto& [name, statuses] : std::vector<std::pair<std::string, std::set<unsigned>>>{
             {"Retry-After", {202, 409, 429, 503}}, {"Location", {201, 202}}, {"WWW-Authenticate", {401}},
             {"Idempotent-Replayed", {201, 202, 402}}}) {
      if (!statuses.contains(a.status) || !a.has(Lower(name))) continue;
      const auto headers = response["headers"];
      if (!headers || !headers[name]) Mismatch(label + ": sends header " + name + " the document does not list", r, a, "");
    }
  }

  void CheckUndeclared(const Request& r, const Answer& a, const std::set<std::string>& declared) {
    if (!a.error.empty() || a.status != 405) {
      Mismatch("undeclared " + r.method + ": not 405", r, a, "");
      return;
    }
    const auto response = doc_.Resolve(doc_.root()["components"]["responses"]["MethodNotAllowed"]);
    CheckBody(response, r, a, "405");
    CheckHeaders(response, r, a, "405");
    std::set<std::string> allow;
    std::stringstream in(a.header("allow"));
    for (std::string m; std::getline(in, m, ',');) {
      m.erase(0, m.find_first_not_of(' '));
      m.erase(m.find_last_not_of(' ') + 1);
      allow.insert(m);
    }
    if (allow != declared) Mismatch("405 " + r.target.substr(0, 12) + ": Allow is not the declared methods", r, a, "");
  }

  const OpenApiDocument& doc_;
  std::mt19937_64 rng_;
  std::uint16_t port_;
  HttpTestClient client_;
  std::vector<Operation> ops_;
  std::map<std::string, std::set<std::string>> declared_;
  std::map<std::string, std::vector<char32_t>> allowed_;
  std::map<std::string, std::size_t> cycle_;
  std::set<std::string> used_keys_;
  std::vector<PostedCharge> posted_;
  std::vector<std::string> charge_ids_;
  std::size_t sent_ = 0;
  std::map<std::string, std::size_t> tally_;
  std::map<std::string, std::pair<std::string, std::size_t>> mismatches_;
};

TEST_F(OpenApiPropertyE2E, EveryGeneratedRequestIsAnsweredAsTheOpenApiDocumentDescribes) {
  const OpenApiDocument doc(PROJECT_ROOT "/docs/openapi.yaml");
  const auto requests = EnvSize("OPENAPI_PROPERTY_REQUESTS", 2000);
  const std::uint64_t seed = EnvSize("OPENAPI_PROPERTY_SEED", std::random_device{}());
  std::cout << "OPENAPI_PROPERTY_SEED=" << seed << " OPENAPI_PROPERTY_REQUESTS=" << requests << std::endl;
  PropertyRun run(doc, seed, api_->port());
  const auto started = std::chrono::steady_clock::now();
  run.Run(requests);
  const auto seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  std::cout << run.sent() << " requests in " << seconds << " s" << std::endl;
  for (const auto& [what, n] : run.tally()) std::cout << "  " << n << "  " << what << "\n";
  const auto mismatches = run.Mismatches();
  std::string report;
  for (const auto& m : mismatches) report += "\n  " + m;
  EXPECT_TRUE(mismatches.empty()) << mismatches.size() << " disagreement(s) with docs/openapi.yaml (replay with "
                                  << "OPENAPI_PROPERTY_SEED=" << seed << " OPENAPI_PROPERTY_REQUESTS=" << requests
                                  << "):" << report;
  EXPECT_EQ(run.sent(), requests);
}

}  // namespace
}  // namespace charge_outbox::testing
