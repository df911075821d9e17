// `rayx microbenchmark`'s flood: a separate process (this binary run with
// --flood-child) that opens connections presenting a wrong credential to the
// cluster's sockets at a fixed rate, as an attacker on the network would,
// while the benchmark measures a real job's calls.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

namespace rayx::bench {

// One socket to flood: its address and whether it speaks CURVE (the head, or
// every socket with --encrypt) or PLAIN.
struct FloodTarget {
  std::string address;  // tcp://host:port
  bool curve = false;
};

// The flooding process, seen from the benchmark. Started idle; Flood(true)
// starts `rate` connections a second, spread round-robin over the targets,
// each closed after 5 ms (a refused one never answers); at most 256 are open
// at once, so the flood stays bounded whatever the rate.
class FloodProcess {
 public:
  // `server_key`: the cluster's CURVE public key (Z85), so a CURVE attempt
  // goes through the whole handshake, the server's most expensive path, before
  // its credential is refused.
  // `from`: the source address of every connection (an attacker's own
  // machine: 127.0.0.9 on a loopback cluster), or "many" for each from
  // another address (an attacker with more addresses than a server bans).
  FloodProcess(double rate, const std::string& server_key, const std::string& from,
               const std::vector<FloodTarget>& targets);
  ~FloodProcess();
  FloodProcess(const FloodProcess&) = delete;
  FloodProcess& operator=(const FloodProcess&) = delete;

  void Flood(bool on);
  struct Totals {
    int64_t attempts = 0;
    int64_t answered = 0;  // connections that got any message back: the door was open
    double cpu_seconds = 0;  // the flooding process's own user + system time
  };
  // Stops the process and returns what it did. Throws if it failed.
  Totals Finish();

 private:
  pid_t pid_ = -1;
  int to_child_ = -1, from_child_ = -1;
};

// The child's main: argv = {prog, "--flood-child", RATE, SERVER_KEY, FROM,
// "curve:ADDR" | "plain:ADDR", ...}. Reads '1'/'0' (flood on/off) from stdin
// until EOF, then prints "attempts answered" and exits.
int FloodChildMain(int argc, char** argv);

}  // namespace rayx::bench
