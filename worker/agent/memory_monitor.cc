// The node agent's memory monitor (see memory_monitor.h).
#include "agent/memory_monitor.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>

namespace rayx::worker {

namespace {

std::string Percent(double fraction) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f%%", fraction * 100);
  return buf;
}

std::string Describe(const MemoryMonitor::Candidate& c) {
  return std::string(c.for_actor ? "actor" : "task") + " worker pid " + std::to_string(c.pid) +
         " (lease " + c.lease_id.Short() + ")";
}

}  // namespace

Result<MemoryMonitor::Usage> MemoryMonitor::ParseMeminfo(const std::string& text) {
  std::istringstream in(text);
  std::string line;
  uint64_t total = 0, available = 0;
  bool has_total = false, has_available = false;
  while (std::getline(in, line)) {
    unsigned long long kb = 0;
    if (std::sscanf(line.c_str(), "MemTotal: %llu kB", &kb) == 1) {
      total = kb * 1024;
      has_total = true;
    } else if (std::sscanf(line.c_str(), "MemAvailable: %llu kB", &kb) == 1) {
      available = kb * 1024;
      has_available = true;
    }
  }
  if (!has_total || !has_available || total == 0) {
    return Status::Unavailable("no MemTotal and MemAvailable lines in /proc/meminfo");
  }
  Usage usage;
  usage.total = total;
  usage.used = available >= total ? 0 : total - available;
  return usage;
}

Result<MemoryMonitor::Usage> MemoryMonitor::ReadMeminfo(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Status::Unavailable("cannot read " + path);
  std::stringstream text;
  text << in.rdbuf();
  return ParseMeminfo(text.str());
}

void MemoryMonitor::Tick(int64_t now_ms) {
  if (!enabled()) return;
  auto usage = deps_.read_usage();
  if (!usage.ok()) {
    if (!said_unreadable_) deps_.log("memory monitor: " + usage.status().message());
    said_unreadable_ = true;
    return;
  }
  said_unreadable_ = false;
  double fraction = static_cast<double>(usage->used) / static_cast<double>(usage->total);
  bool over = fraction > options_.threshold;
  if (victim_) {
    if (!deps_.alive(victim_->who.pid)) {
      victim_.reset();  // gone: a new one only if memory is still short
    } else if (victim_->killed) {
      return;  // dying: its memory is not back yet
    } else if (!over) {
      deps_.log("memory monitor: memory is at " + Percent(fraction) + " again, below " +
                Percent(options_.threshold) + ": " + Describe(victim_->who) + " keeps running");
      victim_.reset();
      return;
    } else if (now_ms - victim_->asked_at_ms >= options_.grace_ms) {
      deps_.log("memory monitor: memory is still at " + Percent(fraction) + " " +
                std::to_string(now_ms - victim_->asked_at_ms) + " ms after asking " +
                Describe(victim_->who) + " to give up its call: killing it");
      victim_->killed = true;
      ++killed_;
      deps_.kill(victim_->who.lease_id,
                 "the node's memory monitor killed it: memory at " + Percent(fraction) +
                     ", above the threshold of " + Percent(options_.threshold) +
                     " (--memory-usage-threshold)");
      return;
    } else {
      return;  // its grace runs
    }
  }
  if (!over) {
    said_no_worker_ = false;
    return;
  }
  std::vector<Candidate> candidates = deps_.candidates();
  if (candidates.empty()) {
    if (!said_no_worker_) {
      deps_.log("memory monitor: memory is at " + Percent(fraction) + ", above " +
                Percent(options_.threshold) + ", and this node runs no worker to stop");
    }
    said_no_worker_ = true;
    return;
  }
  // Tasks before actors, then the most recently started.
  auto victim = std::min_element(candidates.begin(), candidates.end(),
                                 [](const Candidate& a, const Candidate& b) {
                                   if (a.for_actor != b.for_actor) return !a.for_actor;
                                   return a.started > b.started;
                                 });
  deps_.log("memory monitor: memory is at " + Percent(fraction) + " of " +
            std::to_string(usage->total >> 20) + " MiB, above " + Percent(options_.threshold) +
            ": asking " + Describe(*victim) + " to give up its call (OutOfMemoryError)");
  victim_ = Victim{*victim, now_ms, false};
  ++asked_;
  deps_.ask(victim->pid);
}

}  // namespace rayx::worker
