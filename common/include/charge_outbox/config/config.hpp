// Config: typed, validated reading of one daemon's YAML file with environment overrides.
//
// Every key is a dotted path into the YAML file (`database.pool_size`). The environment variable with
// the same name upper-cased and dots turned into underscores (`DATABASE_POOL_SIZE`) overrides the
// file, so a Kubernetes Deployment can set any value without a new ConfigMap. Secrets are read from
// the environment only: a secret found in the file is an error, so it never ends up in a ConfigMap.
//
// Every problem is a ConfigError naming the key; daemons print it on one line and exit with status 2.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace charge_outbox::config {

// Exit status of a daemon whose configuration is wrong (distinct from 1, a runtime failure).
inline constexpr int kExitConfigError = 2;

class ConfigError : public std::runtime_error {
 public:
  ConfigError(std::string key, std::string problem);

  const std::string& key() const noexcept { return key_; }
  const std::string& problem() const noexcept { return problem_; }

 private:
  std::string key_;
  std::string problem_;
};

// Looks up an environment variable; injectable so tests need not touch the process environment.
using EnvLookup = std::function<std::optional<std::string>(const std::string& name)>;
EnvLookup ProcessEnvironment();
// The names of the process's environment variables.
std::vector<std::string> ProcessEnvironmentNames();

// "250ms", "2s", "5m", "1h" (a non-negative integer and its unit); nullopt for anything else.
std::optional<std::chrono::milliseconds> ParseDuration(std::string_view text);

// Not thread-safe; used once at start-up, then discarded.
class ConfigReader {
 public:
  // `yaml_path` empty means "no file": every value comes from the environment or its default.
  static ConfigReader FromFile(const std::string& yaml_path, EnvLookup env = ProcessEnvironment());
  static ConfigReader FromString(std::string_view yaml_text, EnvLookup env = ProcessEnvironment());

  ConfigReader(ConfigReader&&) noexcept;
  ConfigReader& operator=(ConfigReader&&) noexcept;
  ~ConfigReader();

  std::string String(std::string_view key, std::optional<std::string> fallback = std::nullopt);
  std::int64_t Integer(std::string_view key, std::optional<std::int64_t> fallback, std::int64_t min,
                       std::int64_t max);
  double Number(std::string_view key, std::optional<double> fallback, double min, double max);
  bool Boolean(std::string_view key, std::optional<bool> fallback = std::nullopt);
  // "250ms", "2s", "5m", "1h"; bare integers are refused so a unit is never guessed.
  std::chrono::milliseconds Duration(std::string_view key,
                                     std::optional<std::chrono::milliseconds> fallback,
                                     std::chrono::milliseconds min = std::chrono::milliseconds{0},
                                     std::chrono::milliseconds max = std::chrono::hours{24 * 365});
  // One of `allowed`; the error lists them.
  std::string Choice(std::string_view key, std::optional<std::string> fallback,
                     const std::vector<std::string>& allowed);
  // From the environment only; required and non-empty.
  std::string Secret(std::string_view key);
  std::optional<std::string> OptionalSecret(std::string_view key);

  // A key that was renamed: set in the file or the environment under `old_key`, it is refused with a
  // message naming `new_key`, so an upgrade that keeps an old spelling fails at start instead of
  // silently running on the default. Call it before reading `new_key`.
  void Renamed(std::string_view old_key, std::string_view new_key);

  // Fails on the first key present in the file that nobody asked for: a typo must not be ignored.
  void RejectUnknownKeys() const;
  // The same for the environment, under the sections only this daemon reads (`reconciler` covers
  // RECONCILER_*): a variable there that overrides no key it asked for is refused, naming the nearest
  // key. Sections whose prefix other software uses too (KAFKA_, HTTP_) are not this daemon's to police.
  void RejectUnknownEnvironment(const std::vector<std::string>& sections,
                                const std::vector<std::string>& env_names = ProcessEnvironmentNames()) const;

  // The environment variable that overrides `key`.
  static std::string EnvName(std::string_view key);

 private:
  struct State;
  explicit ConfigReader(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace charge_outbox::config
