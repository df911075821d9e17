// rayx: the command-line interface. main() only dispatches: each command lives
// in its own file (start_command.cc, stop_command.cc, status_command.cc,
// list_command.cc, launch_command.cc, job_command.cc); `rayx microbenchmark`
// hands over to the rayx-microbenchmark program installed beside this one.
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "common/process_control.h"
#include "dashboard_command.h"
#include "job_command.h"
#include "launch_command.h"
#include "list_command.h"
#include "train_command.h"
#include "logs_command.h"
#include "rayx/version.h"
#include "start_command.h"
#include "status_command.h"
#include "stop_command.h"

namespace rayx::cli {
namespace {

const char* kUsage = R"(usage: rayx COMMAND [FLAGS]

Commands:
  start --head [FLAGS]             start a head and this machine's node agent
  start --address HOST:PORT        start a node agent that joins the cluster at HOST:PORT
  stop [--address HOST:PORT]       stop the rayx processes this machine started
  status [--address HOST:PORT] [-v]  show nodes, resource usage and pending demands
  list nodes|actors|workers|objects|placement-groups  show where everything is
  dashboard                        the dashboard's and /metrics' URL and credential
  logs [FILE | --actor NAME | --pid PID] [-f]  list or print any node's log files
  launch [FLAGS] -- COMMAND ...    run a torchrun-style program on N nodes x M processes
  job submit|status|logs|stop|list  run jobs on the cluster (rayx job --help)
  train list|delete|export         the Train checkpoints the nodes keep
  microbenchmark [--address HOST:PORT] [--runs N]  measure tasks, actors and objects

Run `rayx COMMAND --help` for a command's flags. `rayx --version` prints the version.
)";

// Turns "-v" into "--verbose" and "-h" into "--help".
std::vector<std::string> Normalize(int argc, char** argv, int first) {
  std::vector<std::string> args;
  bool command_follows = false;  // never rewrite the user's command after "--"
  for (int i = first; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--") command_follows = true;
    if (!command_follows && a == "-v") a = "--verbose";
    if (!command_follows && a == "-h") a = "--help";
    args.push_back(a);
  }
  return args;
}

// The benchmark is its own program (its workers re-run it): replaces this
// process with it. Returns only when it cannot be started.
int RunMicrobenchmark(int argc, char** argv) {
  std::string bench = detail::SelfDirectory() + "/rayx-microbenchmark";
  std::vector<char*> cargv = {bench.data()};
  for (int i = 2; i < argc; ++i) cargv.push_back(argv[i]);
  cargv.push_back(nullptr);
  execv(bench.c_str(), cargv.data());
  std::cerr << "rayx microbenchmark: cannot run " << bench << ": " << strerror(errno) << "\n";
  return 1;
}

}  // namespace
}  // namespace rayx::cli

int main(int argc, char** argv) {
  using namespace rayx::cli;
  signal(SIGPIPE, SIG_IGN);
  if (argc < 2 || std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h" ||
      std::string(argv[1]) == "help") {
    std::cout << kUsage;
    return argc < 2 ? 2 : 0;
  }
  std::string command = argv[1];
  if (command == "--version" || command == "version") {
    std::cout << "rayx " << rayx::kRayxVersion << " (protocol " << rayx::kProtocolVersion << ")\n";
    return 0;
  }
  std::vector<std::string> args = Normalize(argc, argv, 2);
  if (command == "start") return StartCommand(args);
  if (command == "stop") return StopCommand(args);
  if (command == "status") return StatusCommand(args);
  if (command == "list") return ListCommand(args);
  if (command == "dashboard") return DashboardCommand(args);
  if (command == "logs") return LogsCommand(args);
  if (command == "launch") return LaunchCommand(args);
  if (command == "job") return JobCommand(args);
  if (command == "train") return TrainCommand(args);
  if (command == "microbenchmark") return RunMicrobenchmark(argc, argv);
  std::cerr << "rayx: unknown command '" << command << "'\n\n" << kUsage;
  return 2;
}
