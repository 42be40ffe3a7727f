#pragma once
// Reading the tables of a Markdown document, for the tests that hold a document to the code
// (tests/metrics: docs/metrics.md; tests/config: docs/configuration.md). Plain string scanning: the
// documents are written by hand, in the one table form `| a | b |` with a `| --- |` separator row.

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

namespace charge_outbox::testing {

// The whole file, or "" if it cannot be read.
inline std::string ReadText(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

inline std::string_view Trim(std::string_view s) {
  const auto first = s.find_first_not_of(" \t\r");
  if (first == std::string_view::npos) return {};
  return s.substr(first, s.find_last_not_of(" \t\r") - first + 1);
}

// The document split at its "## " headings: {heading: the text up to the next one}.
inline std::map<std::string, std::string> MarkdownSections(const std::string& document) {
  std::map<std::string, std::string> sections;
  std::string* current = nullptr;
  std::istringstream in(document);
  for (std::string line; std::getline(in, line);) {
    if (line.starts_with("## ")) {
      current = &sections[std::string(Trim(std::string_view(line).substr(3)))];
    } else if (current != nullptr) {
      *current += line;
      *current += '\n';
    }
  }
  return sections;
}

// The table rows of a text, as lists of trimmed cells (the header's separator row left out).
inline std::vector<std::vector<std::string>> MarkdownRows(const std::string& text) {
  std::vector<std::vector<std::string>> rows;
  std::istringstream in(text);
  for (std::string raw; std::getline(in, raw);) {
    const std::string_view line = Trim(raw);
    if (!line.starts_with("| ") || line.starts_with("| ---")) continue;
    std::vector<std::string> cells;
    std::string_view inner = line.substr(1, line.size() - 2);
    for (std::size_t bar; (bar = inner.find('|')) != std::string_view::npos; inner.remove_prefix(bar + 1)) {
      cells.emplace_back(Trim(inner.substr(0, bar)));
    }
    cells.emplace_back(Trim(inner));
    rows.push_back(std::move(cells));
  }
  return rows;
}

}  // namespace charge_outbox::testing
