// --token-file, and the refusal of --token.
#include "token_flags.h"

#include "common/session_dir.h"

namespace rayx::cli {

void TokenFlags::Add(FlagParser& flags) {
  flags.AddString("token-file", &file,
                  "a file holding the cluster token, readable by you alone (chmod 600) "
                  "(default: $RAYX_TOKEN, $RAYX_TOKEN_FILE, else this machine's session)");
  flags.AddString("token", &on_command_line,
                  "refused: a token on the command line is visible to every user of the "
                  "machine; set RAYX_TOKEN or pass --token-file");
}

Result<std::string> TokenFlags::Resolve() const {
  if (!on_command_line.empty()) {
    return Status::InvalidArgument(
        "--token puts the cluster token on the command line, where every user of this machine "
        "can read it (ps, /proc): set RAYX_TOKEN in the environment, or put it in a file "
        "only you can read (chmod 600) and pass --token-file FILE");
  }
  return detail::TokenFromFileOrEnvironment(file);
}

}  // namespace rayx::cli
