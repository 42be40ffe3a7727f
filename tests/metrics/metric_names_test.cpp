// The metric names as a contract (docs/metrics.md): every metric the code registers is documented with
// its type, every documented one is registered, each follows the naming rule (one prefix per component,
// counters and only counters end in `_total`), every label key the code uses is in the documented label
// vocabulary, and no name listed as renamed is still read anywhere (alerts, dashboards, bench scripts,
// tests, docs). Needs nothing but the source tree (SOURCE_ROOT) and git, for the list of its files.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <regex>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "markdown_tables.hpp"

namespace charge_outbox::testing {
namespace {

namespace fs = std::filesystem;

const fs::path kRoot = SOURCE_ROOT;
constexpr const char* kDoc = "docs/metrics.md";
constexpr const char* kThisFile = "tests/metrics/metric_names_test.cpp";

// The component of each source tree, and its prefix (docs/metrics.md, "The naming rule").
const std::vector<std::pair<std::string, std::string>> kPrefixes = {
    {"services/charge-api/", "charge_api_"},
    {"services/outbox-relay/", "outbox_"},
    {"services/reconciler/", "reconciler_"},
    {"common/src/inbox/", "inbox_"},
    {"services/settlement-projection/", "settlement_projection_"},
};
// Names the product contract (or an issue) fixes, whatever the rule says.
const std::map<std::string, std::string> kContract = {{"charges_pending_overdue", "services/charge-api/"},
                                                      {"charges_needs_review", "services/charge-api/"},
                                                      {"outbox_lag_seconds", "services/outbox-relay/"}};

// A metric registered with a literal name: the prometheus builder chain, or common's one-call helpers
// metrics::Counter/Gauge/Histogram(registry, "name", help) and their *Family forms.
const std::regex kBuild(R"x(Build(Counter|Gauge|Histogram|Summary|Info)\(\)\s*\.Name\("([^"]+)"\))x");
const std::regex kHelper(R"x(\bmetrics::(Counter|Gauge|Histogram|Summary|Info)(?:Family)?\(\s*[^,()]+,\s*"([^"]+)")x");
// The reconciler's probe registers its unlabelled gauges through a local helper, gauge("name", ...).
const std::regex kHelperGauge(R"x(\bgauge\(\s*"([^"]+)")x");
// The label pairs of a series: .Add({{"key", value}, {"key", value}}).
const std::regex kSeries(R"x(\.Add\(\s*\{(\{[\s\S]*?\})\})x");
const std::regex kLabelKey(R"x(\{"([a-z_]+)",\s)x");

struct Registered {
  std::string kind;
  std::string file;
};

template <typename F>
void ForEachMatch(const std::string& text, const std::regex& re, F f) {
  for (std::sregex_iterator it(text.begin(), text.end(), re), end; it != end; ++it) f(*it);
}

std::string Lower(std::string s) {
  std::ranges::transform(s, s.begin(), [](char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

bool IsWord(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_'; }

// The files git knows under `paths` of the tree (tracked, or new and not ignored).
std::vector<std::string> GitFiles(const std::string& paths) {
  const std::string command = "git -C '" + kRoot.string() + "' ls-files --cached --others --exclude-standard " + paths;
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(command.c_str(), "r"), pclose);
  if (!pipe) throw std::runtime_error("cannot run " + command);
  std::string out;
  char buffer[4096];
  for (std::size_t n; (n = std::fread(buffer, 1, sizeof buffer, pipe.get())) > 0;) out.append(buffer, n);
  std::vector<std::string> files;
  for (std::size_t start = 0, end; start < out.size(); start = end + 1) {
    end = out.find('\n', start);
    if (end == std::string::npos) end = out.size();
    if (end > start) files.push_back(out.substr(start, end - start));
  }
  return files;
}

// (file, text) of every source of common/src and services/ that registers a metric.
const std::vector<std::pair<std::string, std::string>>& MetricSources() {
  static const auto sources = [] {
    std::vector<std::pair<std::string, std::string>> found;
    for (const auto& rel : GitFiles("common/src services")) {
      if (!rel.ends_with(".cpp") || !fs::exists(kRoot / rel)) continue;
      std::string text = ReadText(kRoot / rel);
      if (text.find("prometheus::Build") != std::string::npos || std::regex_search(text, kHelper)) {
        found.emplace_back(rel, std::move(text));
      }
    }
    return found;
  }();
  return sources;
}

// {name: (type, file)} for every metric registered in common/src and services/.
const std::map<std::string, Registered>& RegisteredMetrics() {
  static const auto registered = [] {
    std::map<std::string, Registered> found;
    for (const auto& [rel, text] : MetricSources()) {
      for (const auto* re : {&kBuild, &kHelper}) {
        ForEachMatch(text, *re, [&](const std::smatch& m) { found[m[2]] = {Lower(m[1]), rel}; });
      }
      ForEachMatch(text, kHelperGauge, [&](const std::smatch& m) { found[m[1]] = {"gauge", rel}; });
    }
    return found;
  }();
  return registered;
}

std::map<std::string, std::string> DocSections() { return MarkdownSections(ReadText(kRoot / kDoc)); }

// {name: type} of every metric in a component table (a row: name, type, labels, meaning).
std::map<std::string, std::string> DocumentedMetrics() {
  static const std::regex name("`([a-z_]+)`");
  std::map<std::string, std::string> found;
  for (const auto& [heading, text] : DocSections()) {
    if (heading.starts_with("Renamed") || heading.starts_with("The naming rule")) continue;
    for (const auto& cells : MarkdownRows(text)) {
      std::smatch m;
      if (cells.size() == 4 && std::regex_match(cells[0], m, name)) found[m[1]] = cells[1];
    }
  }
  return found;
}

TEST(MetricNames, TheScanFindsEveryComponent) {
  // A scan that found nothing would pass every other test.
  for (const auto& [tree, prefix] : kPrefixes) {
    EXPECT_TRUE(std::ranges::any_of(RegisteredMetrics(), [&](const auto& r) { return r.second.file.starts_with(tree); }))
        << "no metric registered under " << tree;
  }
}

TEST(MetricNames, EveryRegisteredMetricIsDocumentedWithItsType) {
  const auto docs = DocumentedMetrics();
  for (const auto& [name, registered] : RegisteredMetrics()) {
    const auto doc = docs.find(name);
    if (doc == docs.end()) {
      ADD_FAILURE() << name << " (" << registered.file << ") is not in " << kDoc;
      continue;
    }
    EXPECT_EQ(doc->second, registered.kind)
        << name << ": " << kDoc << " says " << doc->second << ", " << registered.file << " registers a " << registered.kind;
  }
}

TEST(MetricNames, EveryDocumentedMetricIsRegistered) {
  for (const auto& [name, kind] : DocumentedMetrics()) {
    EXPECT_TRUE(RegisteredMetrics().contains(name)) << kDoc << " lists " << name << ", which no code registers";
  }
}

TEST(MetricNames, OnePrefixPerComponent) {
  for (const auto& [name, registered] : RegisteredMetrics()) {
    const std::string& rel = registered.file;
    if (const auto contract = kContract.find(name); contract != kContract.end()) {
      EXPECT_TRUE(rel.starts_with(contract->second)) << name << " is registered in " << rel;
      continue;
    }
    const auto tree = std::ranges::find_if(kPrefixes, [&](const auto& p) { return rel.starts_with(p.first); });
    if (tree == kPrefixes.end()) {
      ADD_FAILURE() << name << ": " << rel << " belongs to no component of " << kDoc;
      continue;
    }
    EXPECT_TRUE(name.starts_with(tree->second)) << name << " (" << rel << ") lacks its prefix " << tree->second;
    EXPECT_FALSE(name.starts_with("outbox_relay_")) << name << " (" << rel << "): outbox_relay_ beside outbox_";
  }
}

TEST(MetricNames, CountersAndOnlyCountersEndInTotal) {
  static const std::regex not_base_unit("_(ms|milliseconds|millis|kb|mb)(_|$)");
  for (const auto& [name, registered] : RegisteredMetrics()) {
    const auto& [kind, rel] = registered;
    EXPECT_EQ(kind == "counter", name.ends_with("_total")) << name << " is a " << kind << " (" << rel << ")";
    EXPECT_FALSE(std::regex_search(name, not_base_unit)) << name << " (" << rel << "): not a base unit";
    if (kind == "histogram" && name.find("duration") != std::string::npos) {
      EXPECT_TRUE(name.ends_with("_duration_seconds")) << name << " (" << rel << "): a duration not in _duration_seconds";
    }
  }
}

TEST(MetricNames, EveryLabelKeyIsInTheVocabulary) {
  static const std::regex quoted("`([a-z_]+)`");
  std::set<std::string> vocabulary;
  for (const auto& cells : MarkdownRows(DocSections()["The naming rule"])) {
    ForEachMatch(cells[0], quoted, [&](const std::smatch& m) { vocabulary.insert(m[1]); });
  }
  ASSERT_TRUE(vocabulary.contains("outcome")) << kDoc << ": the label table lists no `outcome`";
  std::set<std::string> seen;
  for (const auto& [rel, text] : MetricSources()) {
    ForEachMatch(text, kSeries, [&](const std::smatch& series) {
      const std::string labels = series[1];
      ForEachMatch(labels, kLabelKey, [&](const std::smatch& m) {
        seen.insert(m[1]);
        EXPECT_TRUE(vocabulary.contains(m[1])) << "label " << m[1] << " (" << rel << ") is not in " << kDoc
                                               << "'s label table";
      });
    });
  }
  for (const char* key : {"outcome", "route", "retryability", "kind"}) {
    EXPECT_TRUE(seen.contains(key)) << "the scan found no series labelled " << key;
  }
}

// Whether `word` occurs in `text` as a whole word (\bword\b), at or after `from` and before `to`.
bool HasWord(const std::string& text, const std::string& word, std::size_t from = 0,
             std::size_t to = std::string::npos) {
  to = std::min(to, text.size());
  for (auto at = text.find(word, from); at != std::string::npos && at + word.size() <= to;
       at = text.find(word, at + 1)) {
    const bool starts = at == 0 || !IsWord(text[at - 1]) || !IsWord(word.front());
    const bool ends = at + word.size() == text.size() || !IsWord(text[at + word.size()]) || !IsWord(word.back());
    if (starts && ends) return true;
  }
  return false;
}

// name{... label=...}: a selector on the renamed label of the metric.
bool SelectsBy(const std::string& text, const std::string& name, const std::string& label) {
  const std::string open = name + "{";
  for (auto at = text.find(open); at != std::string::npos; at = text.find(open, at + 1)) {
    const auto start = at + open.size();
    if (HasWord(text, label + "=", start, text.find('}', start))) return true;
  }
  return false;
}

// `by (... label ...)`, `without (... label ...)` or a `{{label}}` legend.
bool GroupsOrShowsBy(const std::string& text, const std::string& label) {
  if (text.find("{{" + label + "}}") != std::string::npos) return true;
  for (const std::string clause : {"by (", "without ("}) {
    for (auto at = text.find(clause); at != std::string::npos; at = text.find(clause, at + 1)) {
      if (at > 0 && IsWord(text[at - 1])) continue;
      const auto start = at + clause.size();
      if (HasWord(text, label, start, text.find(')', start))) return true;
    }
  }
  return false;
}

TEST(MetricNames, NoRenamedNameIsReadAnywhere) {
  static const std::regex named(R"x(`([a-z_]+)(\{[^`]*\})?`)x");
  static const std::regex first_label(R"x(^\{([a-z_]+)=)x");
  std::vector<std::pair<std::string, std::optional<std::string>>> renamed;  // (old name, its renamed label)
  for (const auto& cells : MarkdownRows(DocSections()["Renamed (upgrading dashboards and rules)"])) {
    std::smatch before;
    std::smatch after;
    if (cells.size() < 2 || !std::regex_match(cells[0], before, named) || !std::regex_match(cells[1], after, named)) {
      continue;
    }
    std::optional<std::string> label;
    const std::string selector = before[2];
    if (std::smatch m; std::regex_search(selector, m, first_label)) label = m[1];
    renamed.emplace_back(before[1], label);
  }
  ASSERT_TRUE(std::ranges::any_of(renamed, [](const auto& r) { return r.first == "outbox_relay_members"; }))
      << kDoc << "'s renamed table no longer lists outbox_relay_members";
  ASSERT_TRUE(std::ranges::any_of(renamed, [](const auto& r) { return r.second == "class"; }))
      << kDoc << "'s renamed table no longer lists a renamed label `class`";
  for (const auto& rel : GitFiles("")) {
    if (rel == kDoc || rel == kThisFile || !fs::is_regular_file(kRoot / rel)) continue;
    std::string text = ReadText(kRoot / rel);
    if (text.find('\0') != std::string::npos) continue;  // not text
    for (auto at = text.find("\\\""); at != std::string::npos; at = text.find("\\\"", at)) text.erase(at, 1);
    for (const auto& [name, label] : renamed) {
      if (label) {
        EXPECT_FALSE(SelectsBy(text, name, *label)) << rel << " still reads " << name << "{" << *label << "=...}";
        if (text.find(name) != std::string::npos) {
          EXPECT_FALSE(GroupsOrShowsBy(text, *label)) << rel << " reads " << name << " and still groups or shows by "
                                                      << *label;
        }
      } else {
        EXPECT_FALSE(HasWord(text, name)) << rel << " still reads " << name;
      }
    }
  }
}

}  // namespace
}  // namespace charge_outbox::testing
