#include "agent/output_forwarder.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <utility>

namespace rayx::worker {

// Lines by job (workers' and processes' apart) into notices of at most
// max_notice_bytes; consecutive lines of one source share an OutputLines.
class OutputForwarder::Batcher {
 public:
  explicit Batcher(size_t max_bytes) : max_bytes_(max_bytes) {}

  void Add(const JobId& job, bool processes, const std::string& source, std::string_view line) {
    const std::pair<JobId, bool> key(job, processes);
    auto it = open_.find(key);
    if (it == open_.end() || bytes_[it->second] + line.size() > max_bytes_) {
      protocol::WorkerOutputNotice& notice = out_.emplace_back();
      notice.job_id = job;
      notice.processes = processes;
      bytes_.push_back(0);
      it = open_.insert_or_assign(key, out_.size() - 1).first;
    }
    protocol::WorkerOutputNotice& notice = out_[it->second];
    if (notice.batches.empty() || notice.batches.back().source != source) {
      notice.batches.emplace_back().source = source;
      bytes_[it->second] += source.size();
    }
    notice.batches.back().lines.emplace_back(line);
    bytes_[it->second] += line.size() + 8;
  }

  std::vector<protocol::WorkerOutputNotice> Take() { return std::move(out_); }

 private:
  size_t max_bytes_;
  std::vector<protocol::WorkerOutputNotice> out_;
  std::vector<size_t> bytes_;  // per notice in out_
  // The notice each job fills now, for its workers and its processes.
  std::map<std::pair<JobId, bool>, size_t> open_;
};

std::vector<protocol::WorkerOutputNotice> OutputForwarder::Poll(
    const std::vector<Worker>& running, const std::vector<Worker>& exited) {
  for (auto& [lease, f] : followed_) f.running = false;
  for (const auto* workers : {&running, &exited}) {
    for (const auto& w : *workers) {
      if (w.log_path.empty()) continue;
      Followed& f = followed_[{w.lease_id, w.pid}];
      if (f.path.empty()) {
        f.job_id = w.job_id;
        f.pid = w.pid;
        f.path = w.log_path;
        f.process = w.process;
        f.name = w.name;
      }
      f.running = workers == &running;
    }
  }
  Batcher batcher(options_.max_notice_bytes);
  for (auto it = followed_.begin(); it != followed_.end();) {
    Followed& f = it->second;
    Read(f, !f.running, batcher);
    it = f.running ? std::next(it) : followed_.erase(it);
  }
  return batcher.Take();
}

void OutputForwarder::Read(Followed& f, bool last, Batcher& batcher) {
  int fd = ::open(f.path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return;
  struct stat st {};
  uint64_t size = ::fstat(fd, &st) == 0 ? static_cast<uint64_t>(st.st_size) : f.offset;
  uint64_t available = size > f.offset ? size - f.offset : 0;
  uint64_t want = std::min<uint64_t>(available, options_.max_bytes_per_period);
  std::string chunk(want, '\0');
  ssize_t got = want > 0 ? ::pread(fd, chunk.data(), want, static_cast<off_t>(f.offset)) : 0;
  // Whether the part to be skipped ends a line: then the next read starts one.
  char last_byte = '\n';
  if (available > want && ::pread(fd, &last_byte, 1, static_cast<off_t>(size - 1)) != 1) {
    last_byte = 0;
  }
  ::close(fd);
  chunk.resize(got > 0 ? static_cast<size_t>(got) : 0);
  f.offset += chunk.size();

  std::string_view rest = chunk;
  if (f.skip_line) {
    size_t newline = rest.find('\n');
    if (newline == std::string_view::npos) {
      rest = {};
    } else {
      rest.remove_prefix(newline + 1);
      f.skip_line = false;
    }
  }
  for (size_t newline; (newline = rest.find('\n')) != std::string_view::npos;) {
    if (f.partial.empty()) {
      Line(f, rest.substr(0, newline), batcher);
    } else {
      f.partial.append(rest.substr(0, newline));
      Line(f, f.partial, batcher);
      f.partial.clear();
    }
    rest.remove_prefix(newline + 1);
  }
  f.partial.append(rest);
  if (f.partial.size() > options_.max_line_bytes) {
    f.partial.resize(options_.max_line_bytes);
    Line(f, f.partial + " [rayx: line cut at " + std::to_string(options_.max_line_bytes) +
                " bytes]", batcher);
    f.partial.clear();
    f.skip_line = true;
  }
  if (available > want && chunk.size() == want) {
    // More than a period's share: the rest of it is skipped, never queued.
    uint64_t skipped = available - want;
    f.offset = size;
    f.partial.clear();
    f.skip_line = last_byte != '\n';
    Line(f,
         "[rayx: " + std::to_string(skipped) + " bytes of this worker's output skipped (over " +
             std::to_string(options_.max_bytes_per_period >> 10) +
             " KiB a period); all of it is in " + f.path + " on " + options_.node_ip + "]",
         batcher);
  }
  if (last && !f.partial.empty() && !f.skip_line) {
    Line(f, f.partial, batcher);
    f.partial.clear();
  }
}

void OutputForwarder::Line(Followed& f, std::string_view line, Batcher& batcher) {
  std::string_view marker = protocol::kOutputNameMarker;
  if (line.substr(0, marker.size()) == marker) {
    f.name.assign(line.substr(marker.size(), 200));
    return;
  }
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  batcher.Add(f.job_id, f.process, Source(f), line);
}

std::string OutputForwarder::Source(const Followed& f) const {
  std::string where = "pid=" + std::to_string(f.pid) + ", ip=" + options_.node_ip;
  return f.name.empty() ? where : f.name + " " + where;
}

}  // namespace rayx::worker
