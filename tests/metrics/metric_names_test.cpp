// The metric names as a contract (docs/metrics.md): every metric the code registers is documented with
// its type, every documented one is registered, each follows the naming rule (one prefix per component,
// counters and only counters end in `_total`), every label key the code uses is in the documented label
// vocabulary, every HELP text is a string literal that opens its row's meaning word for word, and no
// name listed as renamed is still read anywhere (alerts, dashboards, bench scripts, tests, docs). Needs
// nothing but the source tree (SOURCE_ROOT) and git, for the list of its files.
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
#include <string_view>
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
  std::optional<std::string> help;  // the HELP text, when it is a string literal
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

// The string literal(s) at `at`, after blanks and line comments: adjacent literals concatenated, the
// escapes a HELP text may hold undone. nullopt when the text there is no literal (a variable, a call).
std::optional<std::string> LiteralAt(const std::string& text, std::size_t at) {
  auto skip_blanks = [&] {
    while (at < text.size()) {
      if (std::isspace(static_cast<unsigned char>(text[at])) != 0) {
        ++at;
      } else if (text.compare(at, 2, "//") == 0) {
        at = text.find('\n', at);
        if (at == std::string::npos) at = text.size();
      } else {
        break;
      }
    }
  };
  std::optional<std::string> value;
  for (skip_blanks(); at < text.size() && text[at] == '"'; skip_blanks()) {
    if (!value) value.emplace();
    for (++at; at < text.size() && text[at] != '"'; ++at) {
      if (text[at] != '\\' || at + 1 == text.size()) {
        value->push_back(text[at]);
      } else {
        ++at;
        value->push_back(text[at] == 'n' ? '\n' : text[at]);  // \" \\ \' and \n
      }
    }
    if (at < text.size()) ++at;  // the closing quote
  }
  return value;
}

// The HELP text of a registration whose name literal ends at `at`: the next argument of a helper
// (`, "help"`), or the builder's `.Help("help")`.
std::optional<std::string> HelpAfter(const std::string& text, std::size_t at, bool builder) {
  const std::string_view lead = builder ? ".Help(" : ",";
  while (at < text.size() && std::isspace(static_cast<unsigned char>(text[at])) != 0) ++at;
  if (text.compare(at, lead.size(), lead) != 0) return std::nullopt;
  return LiteralAt(text, at + lead.size());
}

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
        ForEachMatch(text, *re, [&](const std::smatch& m) {
          const auto end = static_cast<std::size_t>(m.position(0) + m.length(0));
          found[m[2]] = {Lower(m[1]), rel, HelpAfter(text, end, re == &kBuild)};
        });
      }
      ForEachMatch(text, kHelperGauge, [&](const std::smatch& m) {
        found[m[1]] = {"gauge", rel, HelpAfter(text, static_cast<std::size_t>(m.position(0) + m.length(0)), false)};
      });
    }
    return found;
  }();
  return registered;
}

std::map<std::string, std::string> DocSections() { return MarkdownSections(ReadText(kRoot / kDoc)); }

// {name: row cells} of every metric in a component table (a row: name, type, labels, meaning).
std::map<std::string, std::vector<std::string>> DocumentedRows() {
  static const std::regex name("`([a-z_]+)`");
  std::map<std::string, std::vector<std::string>> found;
  for (const auto& [heading, text] : DocSections()) {
    if (heading.starts_with("Renamed") || heading.starts_with("The naming rule")) continue;
    for (const auto& cells : MarkdownRows(text)) {
      std::smatch m;
      if (cells.size() == 4 && std::regex_match(cells[0], m, name)) found[m[1]] = cells;
    }
  }
  return found;
}

// {name: type} of every documented metric.
std::map<std::string, std::string> DocumentedMetrics() {
  std::map<std::string, std::string> found;
  for (const auto& [name, cells] : DocumentedRows()) found[name] = cells[1];
  return found;
}

// Where a HELP text and its row's meaning differ, or "" when the meaning opens with the HELP text: the
// same words, backticks aside (Markdown code spans), the first letter's case aside (a HELP text is a
// sentence, a table cell is not), and ending where a word or a clause ends, so that the row may go on
// with more (defaults, how to read it, links) but not change what the HELP says.
std::string HelpMismatch(const std::string& help, std::string meaning) {
  std::erase(meaning, '`');
  if (help.empty()) return "the HELP text is empty";
  const bool opens = meaning.size() >= help.size() &&
                     std::tolower(static_cast<unsigned char>(meaning[0])) ==
                         std::tolower(static_cast<unsigned char>(help[0])) &&
                     meaning.compare(1, help.size() - 1, help, 1) == 0;
  if (!opens) return "the row's meaning does not open with the HELP text";
  if (meaning.size() > help.size() && std::string_view(" ,.;:(").find(meaning[help.size()]) == std::string_view::npos) {
    return "the HELP text stops in the middle of a word of the row";
  }
  return "";
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

TEST(MetricNames, EveryHelpTextOpensItsRowWordForWord) {
  // What `# HELP` says on /metrics (or in the Pushgateway) is what docs/metrics.md says: the row's
  // meaning opens with it. The row may say more; it may not say something else.
  const auto rows = DocumentedRows();
  int compared = 0;
  for (const auto& [name, registered] : RegisteredMetrics()) {
    if (!registered.help) {
      ADD_FAILURE() << name << " (" << registered.file << "): its HELP is not a string literal, which this test "
                    << "cannot read: write it as one";
      continue;
    }
    const auto row = rows.find(name);
    if (row == rows.end()) continue;  // EveryRegisteredMetricIsDocumentedWithItsType reports it
    const std::string mismatch = HelpMismatch(*registered.help, row->second[3]);
    EXPECT_EQ(mismatch, "") << name << ": " << registered.file << " says\n  \"" << *registered.help << "\"\n"
                            << kDoc << " says\n  \"" << row->second[3] << "\"";
    ++compared;
  }
  EXPECT_GE(compared, 40) << "the scan compared fewer HELP texts than the product registers";
}

TEST(MetricNames, TheHelpComparisonCatchesAChangedText) {
  // The rule itself, on texts whose answer is known.
  EXPECT_EQ(HelpMismatch("Events this relay parked", "events this relay parked"), "");
  EXPECT_EQ(HelpMismatch("Charges in needs_review", "charges in `needs_review`, by `reason`"), "");
  EXPECT_NE(HelpMismatch("Charges still pending past the configured deadline",
                         "charges still `pending` past `charge.pending_overdue_after` (10 m)"),
            "");
  EXPECT_NE(HelpMismatch("Events this relay", "events this relayed"), "");
  EXPECT_NE(HelpMismatch("", "anything"), "");
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
    const std::string& kind = registered.kind;
    const std::string& rel = registered.file;
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
