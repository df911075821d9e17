// A node's checkpoint directory.
#include "object_store/checkpoint_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <xxhash.h>

#include "rayx/resources.h"

namespace fs = std::filesystem;

namespace rayx {

namespace {

constexpr size_t kBuffer = 4 << 20;

// Each component a plain name.
bool PlainComponents(std::string_view path) {
  if (path.empty() || path.size() > 4096 || path.front() == '/') return false;
  size_t start = 0;
  while (start <= path.size()) {
    size_t slash = path.find('/', start);
    std::string_view part = path.substr(start, slash == std::string_view::npos ? slash : slash - start);
    if (part.empty() || part == "." || part == ".." || part.size() > 255 ||
        part.find('\0') != std::string_view::npos) {
      return false;
    }
    if (slash == std::string_view::npos) break;
    start = slash + 1;
  }
  return true;
}

}  // namespace

// The shard's hash: over each file's path, size and hash, in path order.
std::string CheckpointFiles::Combine(const std::vector<ShardFile>& files,
                                     const std::vector<std::string>& hashes, ShardManifest* out) {
  std::vector<size_t> order(files.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return files[a].path < files[b].path; });
  FileHasher hasher;
  out->files.clear();
  out->bytes = 0;
  for (size_t i : order) {
    const std::string line =
        files[i].path + std::string(1, '\0') + std::to_string(files[i].size) + ":" + hashes[i] + "\n";
    hasher.Update(line.data(), line.size());
    out->files.push_back(files[i]);
    out->bytes += files[i].size;
  }
  out->hash = hasher.Hex();
  return out->hash;
}

namespace {

// Reads and hashes the files under `root`.
Status HashFiles(const std::string& root, std::vector<ShardFile>& files, ShardManifest* out) {
  std::string buffer(kBuffer, '\0');
  std::vector<std::string> hashes;
  for (const ShardFile& f : files) {
    int fd = ::open((root + "/" + f.path).c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) return Status::NotFound("cannot read " + root + "/" + f.path + ": " + std::strerror(errno));
    FileHasher hasher;
    uint64_t read_bytes = 0;
    ssize_t n;
    while ((n = ::read(fd, buffer.data(), buffer.size())) > 0) {
      hasher.Update(buffer.data(), static_cast<size_t>(n));
      read_bytes += static_cast<uint64_t>(n);
    }
    ::close(fd);
    if (n < 0 || read_bytes != f.size) {
      return Status::Internal(root + "/" + f.path + " has " + std::to_string(read_bytes) +
                              " bytes, " + std::to_string(f.size) + " expected");
    }
    hashes.push_back(hasher.Hex());
  }
  CheckpointFiles::Combine(files, hashes, out);
  return Status::OK();
}

// Copies `from` to `to` (new), hashing the bytes as they pass.
Status CopyFile(const std::string& from, const std::string& to, std::string& buffer,
                uint64_t* size, std::string* hash) {
  int in = ::open(from.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (in < 0) return Status::NotFound("cannot read " + from + ": " + std::strerror(errno));
  int out = ::open(to.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (out < 0) {
    ::close(in);
    return Status::Unavailable("cannot create " + to + ": " + std::strerror(errno));
  }
  FileHasher hasher;
  Status status = Status::OK();
  *size = 0;
  ssize_t n;
  while ((n = ::read(in, buffer.data(), buffer.size())) > 0) {
    hasher.Update(buffer.data(), static_cast<size_t>(n));
    size_t done = 0;
    while (done < static_cast<size_t>(n)) {
      ssize_t w = ::write(out, buffer.data() + done, static_cast<size_t>(n) - done);
      if (w <= 0) {
        status = Status::Unavailable("writing " + to + " failed: " + std::strerror(errno) +
                                     " (is the checkpoint disk full?)");
        break;
      }
      done += static_cast<size_t>(w);
    }
    if (!status.ok()) break;
    *size += static_cast<uint64_t>(n);
  }
  if (n < 0 && status.ok()) status = Status::Internal("reading " + from + ": " + std::strerror(errno));
  ::close(in);
  if (::close(out) != 0 && status.ok()) {
    status = Status::Unavailable("writing " + to + " failed: " + std::strerror(errno));
  }
  *hash = hasher.Hex();
  return status;
}

}  // namespace

FileHasher::FileHasher() : state_(XXH3_createState()) {
  XXH3_128bits_reset(static_cast<XXH3_state_t*>(state_));
}
FileHasher::~FileHasher() { XXH3_freeState(static_cast<XXH3_state_t*>(state_)); }
void FileHasher::Update(const char* data, size_t size) {
  XXH3_128bits_update(static_cast<XXH3_state_t*>(state_), data, size);
}
std::string FileHasher::Hex() const {
  XXH128_canonical_t canonical;
  XXH128_canonicalFromHash(&canonical,
                           XXH3_128bits_digest(static_cast<const XXH3_state_t*>(state_)));
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  for (unsigned char byte : canonical.digest) {
    out += kDigits[byte >> 4];
    out += kDigits[byte & 15];
  }
  return out;
}

std::string CheckpointFiles::ShardDir(const std::string& job_hex, const std::string& run_name,
                                      const std::string& checkpoint_id, int rank) {
  std::string run = run_name.empty() ? std::string("run") : run_name.substr(0, 200);
  for (char& c : run) {
    if (c == '/' || c == '\0') c = '_';
  }
  if (run == "." || run == "..") run = "_" + run;
  return job_hex + "/" + run + "/" + checkpoint_id + "/rank-" + std::to_string(rank);
}

bool CheckpointFiles::IsSafeRelative(std::string_view path) { return PlainComponents(path); }

Result<ShardManifest> CheckpointFiles::CopyIn(const std::string& from,
                                              const std::string& shard_dir) const {
  if (!IsSafeRelative(shard_dir)) return Status::InvalidArgument("bad shard directory " + shard_dir);
  std::error_code ec;
  if (!fs::is_directory(from, ec)) {
    return Status::InvalidArgument("the checkpoint directory " + from + " does not exist");
  }
  const std::string target = dir_ + "/" + shard_dir;
  fs::remove_all(target, ec);
  fs::create_directories(target, ec);
  if (ec) return Status::Unavailable("cannot make " + target + ": " + ec.message());
  std::vector<ShardFile> files;
  std::vector<std::string> hashes;
  std::string buffer(kBuffer, '\0');
  for (auto it = fs::recursive_directory_iterator(from, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    const fs::path rel = it->path().lexically_relative(from);
    const auto type = it->symlink_status(ec).type();
    if (type == fs::file_type::directory) {
      fs::create_directories(target + "/" + rel.string(), ec);
      continue;
    }
    if (type != fs::file_type::regular) {
      fs::remove_all(target, ec);
      return Status::InvalidArgument("the checkpoint directory " + from + " holds " +
                                     it->path().string() +
                                     ", which is not a regular file (links are not followed): "
                                     "checkpoint files themselves");
    }
    if (files.size() >= kMaxFiles) {
      fs::remove_all(target, ec);
      return Status::InvalidArgument("the checkpoint directory " + from + " holds more than " +
                                     std::to_string(kMaxFiles) + " files");
    }
    uint64_t size = 0;
    std::string hash;
    Status copied = CopyFile(it->path().string(), target + "/" + rel.string(), buffer, &size, &hash);
    if (!copied.ok()) {
      fs::remove_all(target, ec);
      return copied;
    }
    files.push_back({rel.string(), size});
    hashes.push_back(std::move(hash));
  }
  if (ec) return Status::Internal("listing " + from + ": " + ec.message());
  ShardManifest manifest;
  Combine(files, hashes, &manifest);
  return manifest;
}

Result<ShardManifest> CheckpointFiles::Read(const std::string& shard_dir) const {
  if (!IsSafeRelative(shard_dir)) return Status::InvalidArgument("bad shard directory " + shard_dir);
  const std::string root = dir_ + "/" + shard_dir;
  std::error_code ec;
  if (!fs::is_directory(root, ec)) return Status::NotFound("no shard " + shard_dir + " here");
  std::vector<ShardFile> files;
  for (auto it = fs::recursive_directory_iterator(root, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (it->symlink_status(ec).type() != fs::file_type::regular) continue;
    const std::string name = it->path().filename().string();
    if (name.size() > 8 && name.compare(name.size() - 8, 8, ".partial") == 0) continue;
    files.push_back({it->path().lexically_relative(root).string(), it->file_size(ec)});
  }
  ShardManifest manifest;
  RAYX_RETURN_IF_ERROR(HashFiles(root, files, &manifest));
  return manifest;
}

Result<int> CheckpointFiles::OpenFile(const std::string& relative) const {
  if (!IsSafeRelative(relative)) {
    return Status::InvalidArgument("'" + relative.substr(0, 200) +
                                   "' is not a file of the checkpoint directory");
  }
  int fd = ::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return Status::NotFound("no checkpoint directory " + dir_);
  size_t start = 0;
  while (true) {
    size_t slash = relative.find('/', start);
    const bool last = slash == std::string::npos;
    const std::string part = relative.substr(start, last ? std::string::npos : slash - start);
    int next = ::openat(fd, part.c_str(),
                        O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | (last ? 0 : O_DIRECTORY));
    int err = errno;
    ::close(fd);
    if (next < 0) {
      return err == ELOOP || err == ENOTDIR
                 ? Status::InvalidArgument(relative + " goes through a link: refused")
                 : Status::NotFound("no checkpoint file " + relative + " here");
    }
    fd = next;
    if (last) break;
    start = slash + 1;
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return Status::InvalidArgument(relative + " is not a regular file");
  }
  return fd;
}

Result<std::string> CheckpointFiles::PrepareFile(const std::string& relative) const {
  if (!IsSafeRelative(relative)) return Status::InvalidArgument("bad checkpoint file " + relative);
  const fs::path path = fs::path(dir_) / relative;
  std::error_code ec;
  fs::create_directories(path.parent_path(), ec);
  if (ec) return Status::Unavailable("cannot make " + path.parent_path().string() + ": " + ec.message());
  return path.string();
}

Status CheckpointFiles::Remove(const std::string& relative) const {
  if (!IsSafeRelative(relative)) return Status::InvalidArgument("bad checkpoint path " + relative);
  std::error_code ec;
  fs::remove_all(fs::path(dir_) / relative, ec);
  if (ec) return Status::Unavailable("cannot remove " + relative + ": " + ec.message());
  return Status::OK();
}

Status CheckpointFiles::SetLimit(uint64_t bytes) const {
  const std::string path = dir_ + "/.limit";
  std::ofstream out(path + ".making", std::ios::trunc);
  out << bytes << "\n";
  out.close();
  if (!out || ::rename((path + ".making").c_str(), path.c_str()) != 0) {
    return Status::Unavailable("cannot write " + path);
  }
  return Status::OK();
}

uint64_t CheckpointFiles::limit() const {
  std::ifstream in(dir_ + "/.limit");
  uint64_t bytes = 0;
  if (!(in >> bytes)) return 0;
  return bytes;
}

Status CheckpointFiles::CheckRoom(uint64_t bytes) const {
  const uint64_t most = limit();
  if (most == 0) return Status::OK();
  const uint64_t used = UsageBytes();
  if (used + bytes <= most) return Status::OK();
  auto human = [](uint64_t b) { return FormatBytes(static_cast<double>(b)); };
  return Status::ResourceExhausted(
      "a checkpoint shard of " + human(bytes) + " does not fit: this node's checkpoint "
      "directory " + dir_ + " holds " + human(used) + " of its limit " + human(most) +
      " (--checkpoint-disk-limit). Delete finished runs' checkpoints (`rayx train delete "
      "RUN`), keep fewer (num_to_keep), or start the node with a larger limit");
}

Status CheckpointFiles::KeepRecord(const std::string& checkpoint_dir,
                                   const std::string& bytes) const {
  if (!IsSafeRelative(checkpoint_dir) ||
      std::count(checkpoint_dir.begin(), checkpoint_dir.end(), '/') != 2) {
    return Status::InvalidArgument("bad checkpoint directory " + checkpoint_dir.substr(0, 200));
  }
  if (bytes.size() > kMaxRecordBytes) {
    return Status::InvalidArgument("a checkpoint record of " + std::to_string(bytes.size()) +
                                   " bytes (at most " + std::to_string(kMaxRecordBytes) + ")");
  }
  const fs::path dir = fs::path(dir_) / checkpoint_dir;
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return Status::NotFound("no checkpoint " + checkpoint_dir + " on this node");
  }
  const std::string path = (dir / kRecordFile).string();
  const std::string making = path + ".making";
  {
    std::ofstream out(making, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    out.close();
    if (!out) return Status::Unavailable("cannot write " + making);
  }
  if (::rename(making.c_str(), path.c_str()) != 0) {
    return Status::Unavailable("cannot keep " + path + ": " + std::strerror(errno));
  }
  return Status::OK();
}

namespace {
// The directories in `parent`, in path order (never through a link).
std::vector<fs::path> SubDirectories(const fs::path& parent) {
  std::vector<fs::path> found;
  std::error_code ec;
  for (fs::directory_iterator it(parent, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->symlink_status(ec).type() == fs::file_type::directory) found.push_back(it->path());
  }
  std::sort(found.begin(), found.end());
  return found;
}
}  // namespace

std::vector<std::string> CheckpointFiles::RemoveUnrecorded() const {
  std::vector<std::string> removed;
  std::error_code ec;
  // <job>/<run key>/<checkpoint id>: three levels of directories.
  for (const fs::path& job : SubDirectories(dir_)) {
    for (const fs::path& run : SubDirectories(job)) {
      for (const fs::path& checkpoint : SubDirectories(run)) {
        if (fs::symlink_status(checkpoint / kRecordFile, ec).type() == fs::file_type::regular) {
          continue;
        }
        fs::remove_all(checkpoint, ec);
        if (!ec) removed.push_back(fs::relative(checkpoint, dir_, ec).string());
      }
    }
  }
  return removed;
}

std::vector<CheckpointFiles::KeptRecord> CheckpointFiles::Records(size_t max,
                                                                  uint64_t max_bytes) const {
  std::vector<KeptRecord> out;
  uint64_t bytes_in_all = 0;
  std::error_code ec;
  // <job>/<run key>/<checkpoint id>/kRecordFile: three levels of directories.
  for (const fs::path& job : SubDirectories(dir_)) {
    for (const fs::path& run : SubDirectories(job)) {
      for (const fs::path& checkpoint : SubDirectories(run)) {
        if (out.size() >= max) return out;
        const fs::path file = checkpoint / kRecordFile;
        if (fs::symlink_status(file, ec).type() != fs::file_type::regular) continue;
        const uintmax_t size = fs::file_size(file, ec);
        if (ec || size > kMaxRecordBytes) continue;
        if (bytes_in_all + size > max_bytes) return out;
        bytes_in_all += size;
        std::ifstream in(file, std::ios::binary);
        std::string bytes(static_cast<size_t>(size), '\0');
        if (!in.read(bytes.data(), static_cast<std::streamsize>(bytes.size()))) continue;
        out.push_back({fs::relative(checkpoint, dir_, ec).string(), std::move(bytes)});
      }
    }
  }
  return out;
}

bool CheckpointFiles::Empty() const {
  std::error_code ec;
  const fs::path limit = fs::path(dir_) / ".limit";
  for (auto it = fs::recursive_directory_iterator(dir_, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (it->symlink_status(ec).type() != fs::file_type::directory && it->path() != limit) {
      return false;
    }
  }
  return true;
}

uint64_t CheckpointFiles::UsageBytes() const {
  uint64_t total = 0;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir_, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (it->symlink_status(ec).type() == fs::file_type::regular) total += it->file_size(ec);
  }
  return total;
}

}  // namespace rayx
