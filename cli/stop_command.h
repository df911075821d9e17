// `rayx stop`: stops exactly the rayx processes this machine's sessions
// recorded, node agents before heads.
#pragma once

#include <string>
#include <vector>

#include "common/session_dir.h"

namespace rayx::cli {

// Kills what the lease processes of `session`'s node agent left behind (the
// process groups it recorded) when that agent is gone, removes the object
// stores of this machine whose agents are gone (RemoveDeadStores), and says
// so on stdout. Nothing while the agent runs, nor, with `require_record`, when
// the session recorded no agent (one may be starting). The agent's reaper
// does this the moment it dies; this is for when the reaper died with it.
void KillLeftoversOfDeadAgent(const detail::Session& session, bool require_record);

// Runs `rayx stop ARGS` (the words after "stop"); returns the exit code.
int StopCommand(const std::vector<std::string>& args);

}  // namespace rayx::cli
