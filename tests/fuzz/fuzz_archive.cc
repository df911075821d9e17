// Fuzzes the unpacking of package archives (working directories,
// checkpoints) with UnpackArchive from common/directory_archive.h: any bytes
// must be unpacked or refused with a Status, and nothing may land outside the
// destination (no "../" member, absolute path or link may escape it).
#include <sys/stat.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "common/directory_archive.h"
#include "fuzz_util.h"

namespace fs = std::filesystem;

namespace {

// A fresh directory per process: root/ holds only pkg/, and an unpack goes to
// root/pkg/dest. Anything else that appears under root/ escaped.
fs::path g_root;

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  std::string pattern = (fs::temp_directory_path() / "rayx-fuzz-archive-XXXXXX").string();
  char* made = mkdtemp(pattern.data());
  rayx::fuzz::Check(made != nullptr, "cannot make a temporary directory");
  g_root = made;
  std::atexit([] {
    std::error_code ec;
    fs::remove_all(g_root, ec);
  });
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using rayx::fuzz::Check;
  const fs::path pkg = g_root / "pkg";
  const fs::path dest = pkg / "dest";
  std::error_code ec;
  fs::create_directories(pkg, ec);
  Check(!ec, "cannot make " + pkg.string());
  std::string archive(reinterpret_cast<const char*>(data), size);
  rayx::Status s = rayx::UnpackArchive(archive, dest.string());
  (void)s;  // unpacked or refused: both are fine, as long as it stayed inside

  for (const auto& entry : fs::directory_iterator(g_root)) {
    Check(entry.path() == pkg, "an archive wrote " + entry.path().string() +
                                   " outside its destination");
  }
  for (const auto& entry : fs::directory_iterator(pkg)) {
    Check(entry.path() == dest, "an archive left " + entry.path().string() +
                                    " beside its destination");
  }
  // Links inside the destination may only point inside it. Judged by their
  // text, as an archive's links are checked before tar runs: an absolute
  // target, or one that climbs above the destination, points out.
  if (fs::is_directory(dest, ec)) {
    for (auto it = fs::recursive_directory_iterator(dest, ec);
         it != fs::recursive_directory_iterator(); it.increment(ec)) {
      if (!it->is_symlink(ec)) continue;
      fs::path target = fs::read_symlink(it->path(), ec);
      fs::path resolved = (it->path().parent_path() / target).lexically_normal();
      std::string rel = resolved.lexically_relative(dest).string();
      Check(!ec && target.is_relative() && !rel.empty() && rel.rfind("..", 0) != 0,
            "an archive made a link " + it->path().string() + " to " + target.string() +
                ", outside its destination");
    }
  }
  // Make the tree writable again (a member may have had mode 000) and clear it.
  for (auto it = fs::recursive_directory_iterator(g_root, ec);
       it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (!it->is_symlink(ec)) ::chmod(it->path().c_str(), 0700);
  }
  fs::remove_all(pkg, ec);
  return 0;
}
