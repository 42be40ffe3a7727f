#include "charge_outbox/config/config.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <unistd.h>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>
#include <type_traits>

namespace charge_outbox::config {
namespace {

std::vector<std::string> SplitKey(std::string_view key) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  while (start <= key.size()) {
    const auto dot = key.find('.', start);
    const auto end = dot == std::string_view::npos ? key.size() : dot;
    parts.emplace_back(key.substr(start, end - start));
    start = end + 1;
  }
  return parts;
}

// What a file may expand to. YAML's aliases make a graph of the text: an alias inside the map it names is
// a cycle, and aliases that repeat each other grow a tree exponential in the text's size (a few hundred
// bytes for a billion values). Every walk of the tree after the load is bounded by these.
constexpr int kMaxDepth = 16;
constexpr std::size_t kMaxValues = 10'000;

// Every key of every map is a plain name. Checked once at load: a list or map used as a key ("? [a, b]",
// "{[x]: 1}") would otherwise throw from yaml-cpp's conversions deep in a lookup, outside any ConfigError.
// Also checks the bounds above, aliases expanded, before anything else walks the tree.
void RequireScalarKeys(const YAML::Node& node, const std::string& prefix, int depth, std::size_t& values) {
  const auto where = prefix.empty() ? std::string("--config") : prefix;
  if (++values > kMaxValues) {
    throw ConfigError(where, "the file holds more than " + std::to_string(kMaxValues) +
                                 " values once its aliases are expanded");
  }
  if (depth > kMaxDepth) {
    throw ConfigError(where, "nested deeper than " + std::to_string(kMaxDepth) +
                                 " levels (an alias inside the map or list it names?)");
  }
  if (node.IsMap()) {
    for (const auto& kv : node) {
      if (!kv.first.IsScalar()) {
        throw ConfigError(where, "a key must be a plain name, found a list or map at line " +
                                     std::to_string(kv.first.Mark().line + 1));
      }
      const auto name = kv.first.Scalar();
      RequireScalarKeys(kv.second, prefix.empty() ? name : prefix + "." + name, depth + 1, values);
    }
  } else if (node.IsSequence()) {
    for (const auto& item : node) RequireScalarKeys(item, prefix, depth + 1, values);
  }
}

void CollectLeaves(const YAML::Node& node, const std::string& prefix, std::vector<std::string>& out) {
  if (node.IsMap()) {
    for (const auto& kv : node) {
      const auto name = kv.first.as<std::string>();
      CollectLeaves(kv.second, prefix.empty() ? name : prefix + "." + name, out);
    }
  } else if (!prefix.empty()) {
    out.push_back(prefix);
  }
}

// yaml-cpp's Node::operator= assigns through to the referenced node (rewriting the tree), so walking
// a path must rebind with reset().
std::optional<YAML::Node> Find(const YAML::Node& root, std::string_view key) {
  YAML::Node node;
  node.reset(root);
  for (const auto& part : SplitKey(key)) {
    if (!node.IsMap()) return std::nullopt;
    const YAML::Node child = node[part];
    if (!child.IsDefined()) return std::nullopt;
    node.reset(child);
  }
  return node;
}

std::string Quote(std::string_view s) { return "\"" + std::string(s) + "\""; }

}  // namespace

ConfigError::ConfigError(std::string key, std::string problem)
    : std::runtime_error("config error: " + key + ": " + problem),
      key_(std::move(key)),
      problem_(std::move(problem)) {}

EnvLookup ProcessEnvironment() {
  return [](const std::string& name) -> std::optional<std::string> {
    if (const char* value = std::getenv(name.c_str()); value != nullptr) return std::string(value);
    return std::nullopt;
  };
}

std::vector<std::string> ProcessEnvironmentNames() {
  std::vector<std::string> names;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    const std::string_view text(*entry);
    names.emplace_back(text.substr(0, text.find('=')));
  }
  return names;
}

namespace {

// Edits (insert, delete, replace) from one name to another: how near a typo is to a key.
std::size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

}  // namespace

struct ConfigReader::State {
  YAML::Node root;
  EnvLookup env;
  std::set<std::string> asked;

  // The raw text of a key: environment first, then the file. Records that the key was asked for.
  std::optional<std::string> Raw(std::string_view key) {
    asked.emplace(key);
    if (auto from_env = env(EnvName(key)); from_env.has_value()) return from_env;
    const auto node = Find(root, key);
    if (!node.has_value() || node->IsNull()) return std::nullopt;
    if (!node->IsScalar()) throw ConfigError(std::string(key), "expected a single value, found a list or map");
    return node->Scalar();
  }

  bool InFile(std::string_view key) const { return Find(root, key).has_value(); }
};

ConfigReader::ConfigReader(std::unique_ptr<State> state) : state_(std::move(state)) {}
ConfigReader::ConfigReader(ConfigReader&&) noexcept = default;
ConfigReader& ConfigReader::operator=(ConfigReader&&) noexcept = default;
ConfigReader::~ConfigReader() = default;

ConfigReader ConfigReader::FromFile(const std::string& yaml_path, EnvLookup env) {
  if (yaml_path.empty()) return FromString("", std::move(env));
  std::ifstream in(yaml_path);
  if (!in) throw ConfigError("--config", "cannot read " + Quote(yaml_path) + "; check the path");
  std::stringstream text;
  text << in.rdbuf();
  return FromString(text.str(), std::move(env));
}

ConfigReader ConfigReader::FromString(std::string_view yaml_text, EnvLookup env) {
  auto state = std::make_unique<State>();
  state->env = std::move(env);
  try {
    state->root = YAML::Load(std::string(yaml_text));
  } catch (const YAML::Exception& e) {
    throw ConfigError("--config", "not valid YAML at line " + std::to_string(e.mark.line + 1) + ": " + e.msg);
  }
  if (!state->root.IsNull() && !state->root.IsMap()) {
    throw ConfigError("--config", "the file must be a YAML map of keys");
  }
  std::size_t values = 0;
  RequireScalarKeys(state->root, "", 0, values);
  return ConfigReader(std::move(state));
}

std::string ConfigReader::EnvName(std::string_view key) {
  std::string name(key);
  for (auto& c : name) {
    c = c == '.' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  }
  return name;
}

std::string ConfigReader::String(std::string_view key, std::optional<std::string> fallback) {
  auto raw = state_->Raw(key);
  if (!raw.has_value()) {
    if (fallback.has_value()) return *fallback;
    throw ConfigError(std::string(key), "required; set it in the config file or as " + EnvName(key));
  }
  return *raw;
}

namespace {

// An integer or a number: `raw` parsed whole (or `fallback` when the key is unset), then held to
// [min, max]. The messages name it as `kind` ("integer") and `a_kind` ("an integer").
template <typename T>
T ReadBounded(std::string_view key, const std::optional<std::string>& raw, std::optional<T> fallback, T min, T max,
              std::string_view kind, std::string_view a_kind) {
  T value = 0;
  if (!raw.has_value()) {
    if (!fallback.has_value()) {
      throw ConfigError(std::string(key), "required " + std::string(kind) +
                                              "; set it in the config file or as " + ConfigReader::EnvName(key));
    }
    value = *fallback;
  } else {
    const auto* first = raw->data();
    const auto* last = raw->data() + raw->size();
    const auto [ptr, ec] = std::from_chars(first, last, value);
    bool finite = true;
    if constexpr (std::is_floating_point_v<T>) finite = std::isfinite(value);
    if (ec != std::errc{} || ptr != last || !finite) {
      throw ConfigError(std::string(key), "expected " + std::string(a_kind) + ", got " + Quote(*raw));
    }
  }
  if (value < min || value > max) {
    std::ostringstream msg;
    msg << "must be between " << min << " and " << max << ", got " << value;
    throw ConfigError(std::string(key), msg.str());
  }
  return value;
}

}  // namespace

std::int64_t ConfigReader::Integer(std::string_view key, std::optional<std::int64_t> fallback,
                                   std::int64_t min, std::int64_t max) {
  return ReadBounded(key, state_->Raw(key), fallback, min, max, "integer", "an integer");
}

double ConfigReader::Number(std::string_view key, std::optional<double> fallback, double min, double max) {
  return ReadBounded(key, state_->Raw(key), fallback, min, max, "number", "a number");
}

bool ConfigReader::Boolean(std::string_view key, std::optional<bool> fallback) {
  auto raw = state_->Raw(key);
  if (!raw.has_value()) {
    if (fallback.has_value()) return *fallback;
    throw ConfigError(std::string(key), "required true/false; set it in the config file or as " + EnvName(key));
  }
  if (*raw == "true") return true;
  if (*raw == "false") return false;
  throw ConfigError(std::string(key), "expected true or false, got " + Quote(*raw));
}

std::optional<std::chrono::milliseconds> ParseDuration(std::string_view text) {
  std::int64_t amount = 0;
  const auto* first = text.data();
  const auto* last = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(first, last, amount);
  const std::string_view unit(ptr, static_cast<std::size_t>(last - ptr));
  std::int64_t scale = 0;
  if (unit == "ms") scale = 1;
  else if (unit == "s") scale = 1000;
  else if (unit == "m") scale = 60'000;
  else if (unit == "h") scale = 3'600'000;
  if (ec != std::errc{} || ptr == first || scale == 0 || amount < 0 ||
      amount > std::numeric_limits<std::int64_t>::max() / scale) {
    return std::nullopt;
  }
  return std::chrono::milliseconds{amount * scale};
}

std::chrono::milliseconds ConfigReader::Duration(std::string_view key,
                                                 std::optional<std::chrono::milliseconds> fallback,
                                                 std::chrono::milliseconds min, std::chrono::milliseconds max) {
  using std::chrono::milliseconds;
  auto raw = state_->Raw(key);
  milliseconds value{0};
  if (!raw.has_value()) {
    if (!fallback.has_value()) {
      throw ConfigError(std::string(key), "required duration such as 500ms, 2s, 5m; set it in the config file or as " +
                                              EnvName(key));
    }
    value = *fallback;
  } else {
    const auto parsed = ParseDuration(*raw);
    if (!parsed) {
      throw ConfigError(std::string(key), "expected a duration such as 500ms, 2s, 5m or 1h, got " + Quote(*raw));
    }
    value = *parsed;
  }
  if (value < min || value > max) {
    throw ConfigError(std::string(key), "must be between " + std::to_string(min.count()) + "ms and " +
                                            std::to_string(max.count()) + "ms, got " +
                                            std::to_string(value.count()) + "ms");
  }
  return value;
}

std::string ConfigReader::Choice(std::string_view key, std::optional<std::string> fallback,
                                 const std::vector<std::string>& allowed) {
  auto value = String(key, std::move(fallback));
  if (std::find(allowed.begin(), allowed.end(), value) != allowed.end()) return value;
  std::string list;
  for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
  throw ConfigError(std::string(key), "must be one of " + list + ", got " + Quote(value));
}

std::optional<std::string> ConfigReader::OptionalSecret(std::string_view key) {
  state_->asked.emplace(key);
  if (state_->InFile(key)) {
    throw ConfigError(std::string(key), "is a secret and must not be in the config file; set " + EnvName(key) +
                                            " in the environment instead");
  }
  auto value = state_->env(EnvName(key));
  if (value.has_value() && value->empty()) return std::nullopt;
  return value;
}

std::string ConfigReader::Secret(std::string_view key) {
  auto value = OptionalSecret(key);
  if (!value.has_value()) {
    throw ConfigError(std::string(key), "required; set " + EnvName(key) + " in the environment");
  }
  return *value;
}

void ConfigReader::Renamed(std::string_view old_key, std::string_view new_key) {
  const bool in_env = state_->env(EnvName(old_key)).has_value();
  if (!in_env && !state_->InFile(old_key)) return;
  throw ConfigError(std::string(old_key), "was renamed: set " + std::string(new_key) + " (environment " +
                                              EnvName(new_key) + ") instead" +
                                              (in_env ? " (found in the environment as " + EnvName(old_key) + ")" : ""));
}

void ConfigReader::RejectUnknownEnvironment(const std::vector<std::string>& sections,
                                            const std::vector<std::string>& env_names) const {
  std::set<std::string> known;
  for (const auto& key : state_->asked) known.insert(EnvName(key));
  for (const auto& name : env_names) {
    for (const auto& section : sections) {
      const auto prefix = EnvName(section) + "_";
      if (name.rfind(prefix, 0) != 0 || known.contains(name)) continue;
      std::string nearest;
      std::size_t best = std::string::npos;
      for (const auto& key : state_->asked) {
        const auto env = EnvName(key);
        if (env.rfind(prefix, 0) != 0) continue;
        if (const auto d = EditDistance(name, env); d < best) {
          best = d;
          nearest = key;
        }
      }
      throw ConfigError(name, "an environment variable that sets no key" +
                                  (nearest.empty() ? std::string()
                                                   : "; did you mean " + EnvName(nearest) + " (" + nearest + ")?") +
                                  " A typo must not be ignored: see docs/configuration.md");
    }
  }
}

void ConfigReader::RejectUnknownKeys() const {
  std::vector<std::string> leaves;
  CollectLeaves(state_->root, "", leaves);
  for (const auto& leaf : leaves) {
    if (!state_->asked.contains(leaf)) {
      throw ConfigError(leaf, "unknown key; check its spelling against the documented keys");
    }
  }
}

}  // namespace charge_outbox::config
