// The config loader over any YAML document: ConfigReader as charge-api drives it (LoadConfig reads every
// key, checks the cross-key rules and refuses unknown keys), then every typed getter on a few keys, so
// that any node shape meets every conversion. A ConfigError is the expected outcome of a bad document
// (the daemon prints it and exits 2); any other exception escaping, or a crash, is a finding.
#include <array>
#include <optional>
#include <string>

#include "charge_api_app.hpp"
#include "charge_outbox/config/config.hpp"
#include "fuzz_check.hpp"

namespace {

using namespace charge_outbox;
using std::chrono::milliseconds;

// The secrets come from the environment only; everything else from the document.
std::optional<std::string> Env(const std::string& name) {
  if (name == "DATABASE_URL") return std::string("postgresql://fuzz@127.0.0.1:5432/fuzz");
  if (name == "ACQUIRER_API_KEY") return std::string("fuzz-acquirer-key");
  return std::nullopt;
}

template <typename Read>
void Expect(Read&& read) {
  try {
    read();
  } catch (const config::ConfigError& e) {
    FUZZ_CHECK(!e.key().empty() && !e.problem().empty());
  }
}

constexpr std::array<const char*, 6> kKeys = {"a", "a.b", "a.b.c", "http.port", "http", "log.level"};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto text = fuzz::Bytes(data, size);
  Expect([&] {
    auto reader = config::ConfigReader::FromString(text, Env);
    charge_api::LoadConfig(reader);
  });
  Expect([&] {
    auto reader = config::ConfigReader::FromString(text, Env);
    for (const char* key : kKeys) {
      Expect([&] { reader.String(key, "x"); });
      Expect([&] { reader.Integer(key, 1, -1'000'000, 1'000'000); });
      Expect([&] { reader.Number(key, 0.5, -1e9, 1e9); });
      Expect([&] { reader.Boolean(key, false); });
      Expect([&] { reader.Duration(key, milliseconds{1}); });
      Expect([&] { reader.Choice(key, "info", {"debug", "info", "warn"}); });
    }
    reader.RejectUnknownKeys();
  });
  return 0;
}
