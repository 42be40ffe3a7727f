// Starts the project's binaries as a user would, for e2e tests: argv, environment changes, exit
// status and captured output. Output goes to temporary files, so a chatty child never blocks on a pipe.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace charge_outbox::testing {

struct ProcessResult {
  int exit_code = -1;  // -1 when killed by a signal
  int term_signal = 0;
  std::string out;
  std::string err;
};

// Environment changes: a value sets the variable, std::nullopt removes it.
using EnvChanges = std::map<std::string, std::optional<std::string>>;

class ChildProcess {
 public:
  ChildProcess(const std::vector<std::string>& argv, const EnvChanges& env = {});
  ~ChildProcess();  // SIGKILLs and reaps a child still running
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }
  void Signal(int signal) const;
  // Waits for exit; on timeout SIGKILLs the child and throws.
  ProcessResult Wait(std::chrono::milliseconds timeout);
  // Whether it still runs; a child that has exited is reaped here (a later Wait returns at once).
  bool Running();
  std::string CurrentOutput() const;

 private:
  pid_t pid_ = -1;
  bool reaped_ = false;
  int status_ = 0;  // the wait status, once reaped
  std::string out_path_;
  std::string err_path_;
};

ProcessResult RunProcess(const std::vector<std::string>& argv, const EnvChanges& env = {},
                         std::chrono::milliseconds timeout = std::chrono::seconds{60});

}  // namespace charge_outbox::testing
