// The configuration keys as a contract (docs/configuration.md): every key a daemon reads is in the key
// table, under its environment variable and with every daemon that reads it; every key in the table is
// read by the daemons it names; and every key refused by ConfigReader::Renamed is in the renamed table
// with its new name, and nothing else is. Needs nothing but the source tree (SOURCE_ROOT).
//
// Keys are found in the source of common/src and services/*/src, in the files that take a
// config::ConfigReader&, in the forms the loaders use:
//   - a call whose first argument is a dotted key: reader.Duration("a.b", ...), whole_seconds("a.b", ...)
//   - a table row whose first member is one: {"kafka.sasl_mechanism", "sasl.mechanism"}
//   - a loop over names: for (const char* name : {"x", "y"}) ... std::string("faults.") + name
//   - retry::LoadBackoffOptions(reader, "<scope>", ...): <scope>.backoff.base and .max (and .budget, for
//     the scopes whose defaults carry a budget: kBudgeted below)
// A daemon reads the keys of its own files and of the common loaders they call (a function of common/src
// taking a config::ConfigReader&), transitively.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "markdown_tables.hpp"

namespace charge_outbox::testing {
namespace {

namespace fs = std::filesystem;

const fs::path kRoot = SOURCE_ROOT;
const fs::path kDoc = kRoot / "docs" / "configuration.md";

const std::string kKey = R"x([a-z][a-z0-9_]*(?:\.[a-z0-9_]+)+)x";
const std::string kReads = "String|Integer|Number|Boolean|Duration|Choice|Secret|OptionalSecret";
// The backoff scopes whose defaults carry a budget (retry::BackoffOptions::budget), so that
// LoadBackoffOptions also reads <scope>.backoff.budget: acquirer::RetryPolicyOptions.
const std::set<std::string> kBudgeted = {"acquirer.retry"};

using Strings = std::set<std::string>;
using Pair = std::pair<std::string, std::string>;

struct FileKeys {
  Strings read;
  std::set<Pair> renamed;
  Strings scopes;
};

struct Scan {
  std::map<std::string, Strings> keys;      // key -> the daemons that read it
  std::map<std::string, Strings> key_files; // key -> the files that spell it
  std::map<Pair, Strings> renamed;          // (old, new) -> the daemons that refuse old
  Strings scopes;                           // every backoff scope found
};

std::string Rel(const fs::path& path) { return fs::relative(path, kRoot).generic_string(); }

std::string Join(const Strings& items) {
  std::string out;
  for (const auto& item : items) out += (out.empty() ? "" : ", ") + item;
  return "[" + out + "]";
}

bool IsWord(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_'; }

// Whether `text` calls `name(` (a whole word: not some_name( nor name_x().
bool Calls(const std::string& text, const std::string& name) {
  const std::string call = name + "(";
  for (auto at = text.find(call); at != std::string::npos; at = text.find(call, at + 1)) {
    if (at == 0 || !IsWord(text[at - 1])) return true;
  }
  return false;
}

template <typename F>
void ForEachMatch(const std::string& text, const std::regex& re, F f) {
  for (std::sregex_iterator it(text.begin(), text.end(), re), end; it != end; ++it) f(*it);
}

Strings QuotedNames(const std::string& text) {
  static const std::regex name(R"re("([a-z0-9_]+)")re");
  Strings out;
  ForEachMatch(text, name, [&](const std::smatch& m) { out.insert(m[1]); });
  return out;
}

Strings Daemons() {
  Strings out;
  for (const auto& entry : fs::directory_iterator(kRoot / "services")) {
    if (fs::exists(entry.path() / "main.cpp")) out.insert(entry.path().filename().string());
  }
  return out;
}

std::string StripComments(const std::string& text) {
  static const std::regex comment(R"x(//[^\n]*)x");
  return std::regex_replace(text, comment, "");
}

// Every source file of common/src and services/*/src that takes a ConfigReader (config.cpp aside).
std::map<fs::path, std::string> LoaderFiles() {
  static const std::regex reader_arg(R"x(config::ConfigReader&\s*\w+)x");
  std::vector<fs::path> paths;
  for (const auto& entry : fs::recursive_directory_iterator(kRoot / "common" / "src")) {
    if (entry.path().extension() == ".cpp") paths.push_back(entry.path());
  }
  for (const auto& service : fs::directory_iterator(kRoot / "services")) {
    if (!fs::is_directory(service.path() / "src")) continue;
    for (const auto& entry : fs::directory_iterator(service.path() / "src")) {
      if (entry.path().extension() == ".cpp") paths.push_back(entry.path());
    }
  }
  std::map<fs::path, std::string> files;
  for (const auto& path : paths) {
    if (path.filename() == "config.cpp") continue;
    std::string text = ReadText(path);
    if (std::regex_search(text, reader_arg)) files[path] = StripComments(text);
  }
  return files;
}

FileKeys KeysIn(const std::string& text) {
  static const std::regex call(R"x((?:\.(?:)x" + kReads + R"x()|\b(\w+))\(\s*"()x" + kKey + R"x()")x");
  static const std::regex helper(
      R"x((?:auto (\w+) = \[[^\]]*\]|\b(\w+))\((?:const char\*|const std::string&|std::string_view) key\b)x");
  static const std::regex helper_reads(R"x(\.(?:)x" + kReads + R"x()\(key\b)x");
  static const std::regex table_row(R"x(\{\s*"()x" + kKey + R"x()",\s*")x");
  static const std::regex table_read(R"x(\.(?:)x" + kReads + R"x()\(\s*\w+\.key\b)x");
  static const std::regex loop(R"x(for \(const char\* (\w+) : \{([^}]*)\}\))x");
  static const std::regex renamed(R"x(\.Renamed\(\s*"()x" + kKey + R"x()",\s*"()x" + kKey + R"x()"\))x");
  static const std::regex renamed_loop(
      R"x(\.Renamed\(\s*std::string\("([a-z_.]+\.)"\)\s*\+\s*(\w+),\s*std::string\("([a-z_.]+\.)"\)\s*\+\s*\2\))x");
  static const std::regex backoff(R"x(LoadBackoffOptions\(\s*\w+,\s*"()x" + kKey + R"x(|[a-z_]+)")x");

  FileKeys found;
  ForEachMatch(text, renamed, [&](const std::smatch& m) { found.renamed.emplace(m[1], m[2]); });
  ForEachMatch(text, renamed_loop, [&](const std::smatch& r) {
    ForEachMatch(text, loop, [&](const std::smatch& l) {
      if (l.str(1) != r.str(2)) return;
      for (const auto& name : QuotedNames(l[2])) found.renamed.emplace(r.str(1) + name, r.str(3) + name);
    });
  });
  Strings helpers;
  ForEachMatch(text, helper, [&](const std::smatch& m) {
    const auto end = static_cast<std::size_t>(m.position(0) + m.length(0));
    if (std::regex_search(text.substr(end, 300), helper_reads)) helpers.insert(m[1].matched ? m.str(1) : m.str(2));
  });
  ForEachMatch(text, call, [&](const std::smatch& m) {
    if (!m[1].matched || helpers.contains(m[1])) found.read.insert(m[2]);
  });
  if (std::regex_search(text, table_read)) {
    ForEachMatch(text, table_row, [&](const std::smatch& m) { found.read.insert(m[1]); });
  }
  ForEachMatch(text, loop, [&](const std::smatch& l) {
    const std::string body = text.substr(static_cast<std::size_t>(l.position(0) + l.length(0)), 400);
    const std::regex prefixed(R"x(std::string\("([a-z_.]+\.)"\)\s*\+\s*)x" + l.str(1) + R"x(\b)x");
    ForEachMatch(body, prefixed, [&](const std::smatch& p) {
      if (body.find("Renamed(std::string(\"" + p.str(1) + "\")") != std::string::npos) return;
      for (const auto& name : QuotedNames(l[2])) found.read.insert(p.str(1) + name);
    });
  });
  ForEachMatch(text, backoff, [&](const std::smatch& m) {
    const std::string scope = m[1];
    found.scopes.insert(scope);
    found.read.insert(scope + ".backoff.base");
    found.read.insert(scope + ".backoff.max");
    if (kBudgeted.contains(scope)) found.read.insert(scope + ".backoff.budget");
  });
  return found;
}

Scan DoScan() {
  static const std::regex loader_def(R"x((?:^|\n)[\w:<>]+\s+(\w+)\(config::ConfigReader&\s*\w+)x");
  const auto files = LoaderFiles();
  std::map<fs::path, FileKeys> found;
  std::map<std::string, fs::path> loaders;  // common loader function -> its file
  const std::string common = (kRoot / "common").string() + "/";
  for (const auto& [path, text] : files) {
    found[path] = KeysIn(text);
    if (path.string().starts_with(common)) {
      ForEachMatch(text, loader_def, [&](const std::smatch& m) { loaders[m[1]] = path; });
    }
  }
  Scan scan;
  for (const auto& daemon : Daemons()) {
    const std::string own = (kRoot / "services" / daemon).string() + "/";
    std::vector<fs::path> todo;
    for (const auto& [path, text] : files) {
      if (path.string().starts_with(own)) todo.push_back(path);
    }
    std::set<fs::path> seen;
    while (!todo.empty()) {
      const fs::path path = todo.back();
      todo.pop_back();
      if (!seen.insert(path).second) continue;
      for (const auto& [function, file] : loaders) {
        if (file != path && Calls(files.at(path), function)) todo.push_back(file);
      }
    }
    for (const auto& path : seen) {
      const FileKeys& keys = found.at(path);
      for (const auto& key : keys.read) {
        scan.keys[key].insert(daemon);
        scan.key_files[key].insert(Rel(path));
      }
      for (const auto& pair : keys.renamed) scan.renamed[pair].insert(daemon);
      scan.scopes.insert(keys.scopes.begin(), keys.scopes.end());
    }
  }
  return scan;
}

const Scan& TheScan() {
  static const Scan scan = DoScan();
  return scan;
}

std::map<std::string, std::string> DocSections() { return MarkdownSections(ReadText(kDoc)); }

struct Documented {
  std::string env;
  Strings daemons;
};

// {key: (env, {daemon})} from the key table (a row: key, environment, daemons, type, default, meaning).
std::map<std::string, Documented> DocumentedKeys() {
  static const std::regex key("`(" + kKey + ")`");
  std::map<std::string, Documented> found;
  for (const auto& cells : MarkdownRows(DocSections()["Every key"])) {
    std::smatch m;
    if (cells.size() != 6 || !std::regex_match(cells[0], m, key)) continue;
    std::string env = cells[1];
    std::erase(env, '`');
    Strings daemons;
    for (std::string_view rest = cells[2]; !rest.empty();) {
      const auto comma = rest.find(',');
      daemons.emplace(Trim(rest.substr(0, comma)));
      rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
    }
    found[m[1]] = {env, daemons};
  }
  return found;
}

// {(old, new)} from the renamed table (a row: old key, new key, daemons).
std::set<Pair> DocumentedRenames() {
  static const std::regex key("`(" + kKey + ")`");
  std::set<Pair> found;
  for (const auto& cells : MarkdownRows(DocSections()["Renamed keys"])) {
    std::smatch old_key;
    std::smatch new_key;
    if (cells.size() >= 2 && std::regex_match(cells[0], old_key, key) && std::regex_match(cells[1], new_key, key)) {
      found.emplace(old_key[1], new_key[1]);
    }
  }
  return found;
}

std::string EnvName(std::string key) {
  std::ranges::transform(key, key.begin(), [](char c) { return c == '.' ? '_' : static_cast<char>(std::toupper(c)); });
  return key;
}

TEST(ConfigKeys, TheScanFindsEveryDaemonAndEveryForm) {
  // A scan that found nothing would pass every other test.
  const Scan& scan = TheScan();
  for (const auto& daemon : Daemons()) {
    EXPECT_TRUE(std::ranges::any_of(scan.keys, [&](const auto& k) { return k.second.contains(daemon); }))
        << "no key found for " << daemon << " (services/" << daemon << "/src)";
  }
  for (const char* key : {"database.url", "database.connect_timeout", "kafka.sasl_mechanism", "kafka.linger_ms",
                          "faults.timeout_rate", "acquirer.retry.backoff.budget", "log.level"}) {
    EXPECT_TRUE(scan.keys.contains(key)) << "the scan misses " << key;
  }
  EXPECT_TRUE(scan.renamed.contains({"server.port", "http.port"})) << "the scan misses Renamed(server.port, http.port)";
  for (const auto& scope : kBudgeted) {
    EXPECT_TRUE(scan.scopes.contains(scope)) << "the budgeted backoff scope " << scope << " is no longer read";
  }
}

TEST(ConfigKeys, EveryKeyReadIsDocumentedWithItsDaemons) {
  const auto docs = DocumentedKeys();
  const Scan& scan = TheScan();
  for (const auto& [key, readers] : scan.keys) {
    const auto doc = docs.find(key);
    if (doc == docs.end()) {
      ADD_FAILURE() << key << " (read by " << Join(readers) << " in " << Join(scan.key_files.at(key))
                    << ") is not in docs/configuration.md";
      continue;
    }
    EXPECT_EQ(doc->second.env, EnvName(key)) << key << ": the environment variable in docs/configuration.md is wrong";
    EXPECT_EQ(doc->second.daemons, readers) << key << ": docs/configuration.md says " << Join(doc->second.daemons)
                                            << ", the code's readers are " << Join(readers) << " ("
                                            << Join(scan.key_files.at(key)) << ")";
  }
}

TEST(ConfigKeys, EveryDocumentedKeyIsRead) {
  const Scan& scan = TheScan();
  for (const auto& [key, doc] : DocumentedKeys()) {
    EXPECT_TRUE(scan.keys.contains(key)) << "docs/configuration.md lists " << key << ", which no daemon reads";
  }
}

TEST(ConfigKeys, EveryRenamedKeyIsInTheRenamedTable) {
  const Scan& scan = TheScan();
  const auto docs = DocumentedRenames();
  for (const auto& [pair, readers] : scan.renamed) {
    EXPECT_TRUE(docs.contains(pair)) << pair.first << " -> " << pair.second << " (ConfigReader::Renamed, "
                                     << Join(readers) << ") is not in docs/configuration.md's renamed table";
  }
  for (const auto& pair : docs) {
    EXPECT_TRUE(scan.renamed.contains(pair)) << "docs/configuration.md's renamed table lists " << pair.first << " -> "
                                             << pair.second << ", which no code refuses";
  }
}

TEST(ConfigKeys, ARenamedKeyIsNoKeyAndItsNewNameIsRead) {
  const Scan& scan = TheScan();
  const auto docs = DocumentedKeys();
  for (const auto& [pair, readers] : scan.renamed) {
    const auto& [old_key, new_key] = pair;
    EXPECT_FALSE(docs.contains(old_key)) << old_key << " is renamed, yet docs/configuration.md's key table lists it";
    const auto read = scan.keys.find(new_key);
    if (read == scan.keys.end()) {
      ADD_FAILURE() << old_key << " is renamed to " << new_key << ", which no daemon reads";
      continue;
    }
    EXPECT_TRUE(std::ranges::includes(read->second, readers))
        << old_key << ": refused by " << Join(readers) << ", " << new_key << " read by " << Join(read->second);
  }
}

}  // namespace
}  // namespace charge_outbox::testing
