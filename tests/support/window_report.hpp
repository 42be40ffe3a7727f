// The window report as `reconciler window` writes it (docs/reconciler.md): JSON lines, one per
// discrepancy ("window discrepancy"), one per charge whose lookup got no answer ("window unverified"),
// written as they are found, and a last line with the counts ("window report"). Header-only.
#pragma once

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace charge_outbox::testing {

struct WindowReport {
  boost::json::object summary;  // the last line
  std::vector<boost::json::object> discrepancies;
  std::vector<boost::json::object> unverified;
  std::size_t lines = 0;
};

// `text` must hold the report's lines and nothing else (stdout, or the --output file): a line that is not
// JSON, not one of the three, or a summary that is not the last line throws, failing the test.
inline WindowReport ParseWindowReport(const std::string& text) {
  WindowReport report;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    ++report.lines;
    if (!report.summary.empty()) throw std::runtime_error("a line after the report's summary: " + line);
    auto object = boost::json::parse(line).as_object();
    const std::string msg(object.at("msg").as_string());
    if (msg == "window discrepancy") {
      report.discrepancies.push_back(std::move(object));
    } else if (msg == "window unverified") {
      report.unverified.push_back(std::move(object));
    } else if (msg == "window report") {
      report.summary = std::move(object);
    } else {
      throw std::runtime_error("not a line of the window report: " + line);
    }
  }
  if (report.summary.empty()) throw std::runtime_error("no summary line in the window report:\n" + text);
  return report;
}

}  // namespace charge_outbox::testing
