// `rayx stop`: SIGTERM (then SIGKILL after a grace period) to the process
// groups this machine's sessions recorded; never looks processes up by name.
#include "stop_command.h"

#include <signal.h>

#include <iostream>

#include "command_error.h"
#include "common/address.h"
#include "common/flags.h"
#include "common/process_control.h"
#include "common/session_dir.h"
#include "object_store/store_owner.h"
#include "rayx/version.h"

namespace rayx::cli {

void KillLeftoversOfDeadAgent(const detail::Session& session, bool require_record) {
  auto processes = session.Processes();
  auto agent = processes.find("agent");
  if (agent == processes.end() ? require_record : detail::IsRunning(agent->second)) return;
  if (int n = detail::KillRecordedGroups(session.GroupDir()); n > 0) {
    std::cout << "Killed what was left of " << n << " lease process group(s) of the node agent"
              << " of " << session.ReadConfig()["address"] << " (session " << session.path()
              << ")\n";
  }
  // Its object store (RAM in /dev/shm; /tmp where that is not writable), and
  // any other store whose agent is gone: never a live agent's.
  for (const char* root : {"/dev/shm", "/tmp"}) {
    for (const std::string& dir : RemoveDeadStores(root)) {
      std::cout << "Removed " << dir << ", the object store of a node agent that is gone\n";
    }
  }
  // Its spilled objects (the session's spill/ unless the node was started
  // with --object-spill-dir, recorded in its config).
  std::string spill_root = session.ReadConfig()["spill_dir"];
  if (spill_root.empty()) spill_root = session.path() + "/spill";
  for (const std::string& dir : RemoveDeadStores(spill_root, kSpillDirPrefix)) {
    std::cout << "Removed " << dir << ", the spilled objects of a node agent that is gone\n";
  }
  // Its checkpoint directory stays: the next agent started with it adopts it.
}

int StopCommand(const std::vector<std::string>& args) {
  std::string address, temp_dir = detail::DefaultTempDir();
  double grace = 10;
  bool force = false, help = false;
  FlagParser flags("rayx stop");
  flags.AddString("address", &address, "stop only the processes of the cluster at HOST:PORT");
  flags.AddDouble("grace-period", &grace, "seconds to wait after SIGTERM before SIGKILL (default 10)");
  flags.AddBool("force", &force, "SIGKILL at once");
  flags.AddString("temp-dir", &temp_dir, "session directory root (default /tmp/rayx)");
  flags.AddBool("help", &help, "show this help");
  if (Status s = flags.Parse(args, nullptr); !s.ok()) return Fail("stop", s.message(), 2);
  if (help) {
    std::cout << "usage: rayx stop [FLAGS]\n" << flags.Usage();
    return 0;
  }
  if (!address.empty()) {
    if (auto hp = ParseHostPort(address, kDefaultHeadPort); !hp.ok()) {
      return Fail("stop", hp.status().message(), 2);
    } else {
      address = hp->ToString();
    }
  }
  // Agents go first so they can tell their head they are leaving; heads last.
  struct Target {
    detail::Session session;
    std::string name;
    detail::ProcessRecord record;
  };
  std::vector<Target> agents, heads;
  std::vector<detail::Session> sessions;
  for (const auto& session : detail::Session::List(temp_dir)) {
    auto config = session.ReadConfig();
    if (!address.empty() && !detail::SameHead(config["address"], address)) continue;
    sessions.push_back(session);
    for (const auto& [name, record] : session.Processes()) {
      if (!detail::IsRunning(record)) {
        session.ForgetProcess(name);  // died on its own earlier
        continue;
      }
      (name == "head" ? heads : agents).push_back({session, name, record});
    }
  }
  // What lease processes left behind once their agent is gone (an agent
  // killed by SIGKILL takes only its direct children with it).
  auto kill_leftovers = [&] {
    for (const auto& session : sessions) KillLeftoversOfDeadAgent(session, false);
  };
  if (agents.empty() && heads.empty()) {
    kill_leftovers();
    std::cout << "No rayx processes started from this machine are running"
              << (address.empty() ? "" : " for " + address) << " (temp dir " << temp_dir
              << ").\n";
    return 0;
  }
  auto stop_group = [&](std::vector<Target>& targets) {
    std::vector<detail::ProcessRecord> records;
    for (const auto& t : targets) {
      detail::SignalGroup(t.record, force ? SIGKILL : SIGTERM);
      records.push_back(t.record);
    }
    auto left =
        detail::WaitForExit(records, force ? 5000 : static_cast<int64_t>(grace * 1000));
    for (const auto& r : left) {
      std::cerr << "rayx stop: pid " << r.pid << " did not exit within " << grace
                << " s; sending SIGKILL\n";
      detail::SignalGroup(r, SIGKILL);
    }
    left = detail::WaitForExit(left, 5000);
    for (const auto& t : targets) {
      bool gone = true;
      for (const auto& r : left) gone = gone && r.pid != t.record.pid;
      if (gone) {
        t.session.ForgetProcess(t.name);
        std::cout << "Stopped rayx-" << t.name << " (pid " << t.record.pid << ") of "
                  << t.session.ReadConfig()["address"] << "\n";
      } else {
        std::cerr << "rayx stop: pid " << t.record.pid << " is still running\n";
      }
    }
    return left.empty();
  };
  bool ok = stop_group(agents);
  kill_leftovers();
  ok = stop_group(heads) && ok;
  return ok ? 0 : 1;
}

}  // namespace rayx::cli
