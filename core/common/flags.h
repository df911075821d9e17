// Command-line flag parsing for the rayx CLI and daemons.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "rayx/status.h"

namespace rayx {

// `args` split at the first bare "--": the flags before it and the command
// after it (empty without a "--"), for commands that run a user's program.
struct FlagsAndCommand {
  std::vector<std::string> flags;
  std::vector<std::string> command;
};
FlagsAndCommand SplitAtDoubleDash(const std::vector<std::string>& args);

// Parses "--name value", "--name=value" and boolean "--name". Everything after a
// bare "--" is positional. Unknown flags, missing values and malformed numbers
// are InvalidArgument errors that name the flag and say what is expected.
class FlagParser {
 public:
  explicit FlagParser(std::string command) : command_(std::move(command)) {}

  void AddString(const std::string& name, std::string* out, const std::string& help);
  // Accepts integers in [min, max].
  void AddInt(const std::string& name, int64_t* out, int64_t min, int64_t max,
              const std::string& help);
  // Accepts non-negative finite numbers.
  void AddDouble(const std::string& name, double* out, const std::string& help);
  void AddBool(const std::string& name, bool* out, const std::string& help);
  // A flag that may repeat; each value is appended.
  void AddStringList(const std::string& name, std::vector<std::string>* out,
                     const std::string& help);

  // True when the user passed the flag (after Parse).
  bool WasSet(const std::string& name) const;

  // Parses argv[0..argc). Positional arguments go to `positional` (an error when
  // null and some are given).
  Status Parse(const std::vector<std::string>& args, std::vector<std::string>* positional);

  // One line per flag, for --help.
  std::string Usage() const;

 private:
  struct Flag {
    bool takes_value = true;
    std::string help;
    std::function<Status(const std::string&)> set;
  };
  std::string command_;
  std::map<std::string, Flag> flags_;
  std::vector<std::string> order_;
  std::map<std::string, bool> set_;
};

}  // namespace rayx
