// What `rayx start` does once its daemons run and it stays in the foreground
// (--block, --from-env): wait on them, run the platform job's command on node
// rank 0, and stop the cluster when that command ends.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/session_dir.h"
#include "rayx/status.h"

namespace rayx::cli {

// Blocks SIGINT, SIGTERM and SIGCHLD in this thread (to be taken with
// sigwait). Call before any daemon starts, so that none can exit unseen.
void BlockForegroundSignals();

// SIGTERM or SIGINT when one is pending (blocked, not yet taken), else 0: the
// waits before the foreground loop check it so that they can be stopped.
int PendingStopSignal();

// Waits on the daemons `session` records (children of this process): returns
// when one exits or on SIGINT/SIGTERM, after stopping the others. Returns 0
// after a signal, or when the node agent exited with status 0 (it left because
// the head stopped the cluster, or `rayx stop` stopped it); 1 when a daemon
// died otherwise. Other children (orphans a container's PID 1 inherits) are
// reaped and otherwise ignored.
// REQUIRES: BlockForegroundSignals() was called before the daemons started.
int BlockUntilDone(const detail::Session& session);

// SIGTERMs every process `session` records (agent first, then head), SIGKILLs
// those still running 10 s later, and forgets them.
void StopSessionProcesses(const detail::Session& session);

// Polls the head at `address` until `num_nodes` nodes are alive or
// `timeout_ms` passes, printing each change. On timeout returns Unavailable
// naming the node ranks (label rayx.io/node-rank) that never joined; earlier,
// Unavailable when a daemon of `session` exits and Cancelled when a stop
// signal is pending (PendingStopSignal).
Status WaitForNodes(const detail::Session& session, const std::string& address,
                    const std::string& token, int num_nodes, int64_t timeout_ms);

// Asks the head at `address` to stop the cluster (every node agent leaves and
// exits) and waits up to `timeout_ms` for the agents to be gone. Returns how
// many agents were still alive at the deadline.
Result<int> StopCluster(const std::string& address, const std::string& token,
                        const std::string& reason, int64_t timeout_ms);

// Node rank 0 of `rayx start --from-env -- COMMAND`: runs `command` (in its
// own process group, with RAYX_ADDRESS and RAYX_TOKEN set so that drivers and
// `rayx launch` find the cluster; given the terminal when this process has it),
// sending it SIGTERM on SIGINT or SIGTERM (and SIGKILL 10 s later); when it
// ends, stops the cluster and this session's daemons and returns its exit
// status (128 + signal when a signal ended it).
// The command's group is recorded in the session's group dir, so that when
// this process is killed, the node agent's reaper kills the command too.
// When a daemon of `session` dies first, the command is stopped (SIGTERM, or at
// once by the agent's reaper when the agent died), the cluster too (if its
// head still answers), and 1 is returned. REQUIRES: BlockForegroundSignals() was called
// before the daemons started.
int RunCommandThenStopCluster(const detail::Session& session,
                              const std::vector<std::string>& command, const std::string& address,
                              const std::string& token);

}  // namespace rayx::cli
