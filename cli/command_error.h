// How every `rayx` command reports a failure: one line on stderr, an exit code.
#pragma once

#include <iostream>
#include <string>

namespace rayx::cli {

// Prints "rayx COMMAND: MESSAGE" to stderr and returns `code` (1 for a failure,
// 2 for a usage error), so a command can `return Fail(...)`.
inline int Fail(const std::string& command, const std::string& message, int code = 1) {
  std::cerr << "rayx " << command << ": " << message << "\n";
  return code;
}

}  // namespace rayx::cli
