// Small helpers that many tests share: text checks, the environment, time, and
// the processes under a pid as /proc lists them.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace rayx::testing {

// True when `needle` occurs in `haystack`.
bool Contains(const std::string& haystack, const std::string& needle);

// The environment variable `name`, or "" when it is not set.
std::string Env(const char* name);

// Milliseconds from `start` until now, on the steady clock.
int64_t MsSince(std::chrono::steady_clock::time_point start);

// Whether a TCP connection from `source` (an IPv4 address of this machine,
// e.g. 127.0.0.9 for "another host" on loopback) to `host`:`port` completes
// within `wait`; one refused, or dropped by a filter, does not.
bool TcpConnectsFrom(const std::string& source, const std::string& host, int port,
                     std::chrono::milliseconds wait);

// The live (not zombie) children of `parent`, from /proc/<pid>/stat: found by
// a recorded pid, never by name. Empty when /proc cannot be read.
std::vector<pid_t> LiveChildrenOf(pid_t parent);

}  // namespace rayx::testing
