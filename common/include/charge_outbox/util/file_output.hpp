// Writing a command's whole answer where it belongs: a file descriptor (stdout kept apart from the log),
// written to the end despite short writes and signals.
#pragma once

#include <string>

namespace charge_outbox::util {

// False if the descriptor refused the rest (errno says why).
bool WriteAll(int fd, const std::string& text);

}  // namespace charge_outbox::util
