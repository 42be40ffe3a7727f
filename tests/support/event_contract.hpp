// The published event contract, checked on what a test read back from Kafka: every payload against its
// JSON Schema in schemas/events by a real validator (Debian's python3-jsonschema, draft 2020-12, run by
// tests/events/check_events.py), and the CloudEvents attributes the contract fixes around it
// (docs/events.md). Header-only: a suite passes its own source root.
#pragma once

#include <boost/json/object.hpp>
#include <boost/json/serialize.hpp>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "child_process.hpp"
#include "kafka_test_topic.hpp"
#include "test_env.hpp"

namespace charge_outbox::testing {

// One line per violation (empty: every message conforms). A checker that cannot run is a violation too.
// `sources`, when given, are the only ce_source values allowed (the daemons that write events).
inline std::vector<std::string> EventContractViolations(const std::vector<ConsumedMessage>& messages,
                                                        const std::string& project_root,
                                                        const std::vector<std::string>& sources = {}) {
  const auto path = std::filesystem::temp_directory_path() / (UniqueName("events") + ".jsonl");
  {
    std::ofstream out(path);
    for (const auto& m : messages) {
      boost::json::object headers;
      for (const auto& [name, value] : m.headers) headers[name] = value;
      boost::json::object line;
      line["key"] = m.key;
      line["value"] = m.value;
      line["headers"] = std::move(headers);
      out << boost::json::serialize(line) << '\n';
    }
  }
  // /usr/bin/python3: the interpreter Debian's python3-jsonschema belongs to, whatever else is on PATH.
  std::vector<std::string> argv{"/usr/bin/python3", project_root + "/tests/events/check_events.py", "--schemas",
                                project_root + "/schemas/events"};
  for (const auto& source : sources) {
    argv.push_back("--source");
    argv.push_back(source);
  }
  argv.push_back(path.string());
  const auto result = RunProcess(argv, {}, std::chrono::seconds{120});
  std::filesystem::remove(path);
  std::vector<std::string> violations;
  std::istringstream lines(result.out);
  for (std::string line; std::getline(lines, line);) {
    if (!line.empty()) violations.push_back(line);
  }
  if (result.exit_code != 0 && violations.empty()) {
    violations.push_back("check_events.py exited " + std::to_string(result.exit_code) + ": " + result.err);
  }
  return violations;
}

}  // namespace charge_outbox::testing
