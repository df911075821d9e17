// The cluster token's flags, the same in every command: --token-file FILE, and
// a --token that is refused, since a token on a command line is visible to
// every user of the machine (/proc/PID/cmdline, `ps`).
#pragma once

#include <string>

#include "common/flags.h"
#include "rayx/status.h"

namespace rayx::cli {

struct TokenFlags {
  std::string file;
  std::string on_command_line;

  // Adds --token-file and the refused --token to `flags`.
  void Add(FlagParser& flags);
  // The token from --token-file, else $RAYX_TOKEN, else $RAYX_TOKEN_FILE; ""
  // when none is given (callers may then read this machine's session).
  // InvalidArgument saying what to do instead for --token, and for a token
  // file that is missing, not 0600 or not the user's own.
  Result<std::string> Resolve() const;
};

}  // namespace rayx::cli
