// Helpers that many tests share (test_helpers.h).
#include "util/test_helpers.h"

#include <dirent.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

namespace rayx::testing {

bool Contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

int64_t MsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                               start)
      .count();
}

std::vector<pid_t> LiveChildrenOf(pid_t parent) {
  std::vector<pid_t> out;
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return out;
  while (dirent* entry = readdir(proc)) {
    char* end = nullptr;
    long pid = std::strtol(entry->d_name, &end, 10);
    if (pid <= 0 || *end != '\0') continue;
    std::ifstream stat("/proc/" + std::string(entry->d_name) + "/stat");
    std::string line;
    std::getline(stat, line);
    size_t close = line.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(line.substr(close + 2));
    char state = 0;
    long ppid = 0;
    rest >> state >> ppid;
    if (ppid == parent && state != 'Z') out.push_back(static_cast<pid_t>(pid));
  }
  closedir(proc);
  return out;
}

}  // namespace rayx::testing
