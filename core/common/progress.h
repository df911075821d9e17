// Progress of a long transfer (the CLI's uploads, a Train rank's checkpoint):
// a bar redrawn in place on a terminal, a line per quarter otherwise (logs,
// CI, pipes, a worker's output forwarded to its driver).
#pragma once

#include <cstdint>
#include <ostream>
#include <string>

namespace rayx {

// Says nothing for transfers under kMinBytes. Not thread-safe.
class Progress {
 public:
  static constexpr uint64_t kMinBytes = 4ull << 20;

  // `what`: "Uploading the working directory"; `terminal`: redraw one line.
  Progress(std::ostream& out, std::string what, uint64_t total, bool terminal);
  // `done` bytes of `total` are through.
  void Update(uint64_t done);
  // Ends the bar's line (terminal) once the transfer is over or failed.
  void Finish();

 private:
  std::ostream& out_;
  std::string what_;
  uint64_t total_;
  bool terminal_;
  bool shown_ = false;
  int last_quarter_ = 0;  // the last quarter printed (lines mode)
};

}  // namespace rayx
