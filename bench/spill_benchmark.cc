// Spilling a node's object store to disk, against the floor: the same bytes
// copied from /dev/shm to the same disk with read()/write(), as `dd` does
// (neither fsyncs: spilled objects do not outlive their agent). Restoring is
// mapping the spilled file and reading every byte, against read() of it.
//
//   ./build/bin/rayx-spill-benchmark [--size-mib N] [--rounds R] [--spill-dir DIR]
//
// Each round alternates floor and rayx on the same bytes; medians and the
// ratio rayx / floor are printed (GB/s, higher is better). Both read every
// byte back.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "common/flags.h"
#include "object_store/shared_memory_store.h"
#include "object_store/store_ledger.h"
#include "object_store/store_spiller.h"
#include "rayx/ids.h"

namespace {

using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

double Seconds(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// dd: read() from `from` into a 4 MiB buffer, write() to `to`.
void CopyPlain(const std::string& from, const std::string& to) {
  int in = ::open(from.c_str(), O_RDONLY | O_CLOEXEC);
  int out = ::open(to.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  std::vector<char> buffer(4 << 20);
  ssize_t n;
  while ((n = ::read(in, buffer.data(), buffer.size())) > 0) {
    if (::write(out, buffer.data(), static_cast<size_t>(n)) != n) break;
  }
  ::close(in);
  ::close(out);
}

// Every byte read, as 8-byte words (what a reader of the object does).
uint64_t Sum(const char* data, size_t size) {
  uint64_t sum = 0;
  for (size_t i = 0; i + 8 <= size; i += 8) {
    uint64_t word;
    std::memcpy(&word, data + i, 8);
    sum += word;
  }
  return sum;
}

uint64_t ReadPlain(const std::string& path) {
  int in = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  std::vector<char> buffer(4 << 20);
  uint64_t sum = 0;
  ssize_t n;
  while ((n = ::read(in, buffer.data(), buffer.size())) > 0) {
    sum += Sum(buffer.data(), static_cast<size_t>(n));
  }
  ::close(in);
  return sum;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace rayx;
  int64_t size_mib = 256, rounds = 5;
  std::string spill_root = "/tmp";
  FlagParser flags("rayx-spill-benchmark");
  flags.AddInt("size-mib", &size_mib, 1, 1 << 20, "object size in MiB (default 256)");
  flags.AddInt("rounds", &rounds, 1, 1000, "rounds (default 5)");
  flags.AddString("spill-dir", &spill_root, "the disk to spill to (default /tmp)");
  std::vector<std::string> args(argv + 1, argv + argc);
  if (Status parsed = flags.Parse(args, nullptr); !parsed.ok()) {
    std::fprintf(stderr, "%s\n", parsed.message().c_str());
    return 2;
  }
  const uint64_t size = static_cast<uint64_t>(size_mib) << 20;
  const std::string hex = detail::RandomHex(6);
  const std::string store_dir = "/dev/shm/rayx-spill-bench-" + hex;
  const std::string spill_dir = spill_root + "/rayx-spill-bench-" + hex;
  fs::create_directories(store_dir);
  fs::create_directories(spill_dir);
  SharedMemoryStore store(store_dir, spill_dir);
  auto ledger = StoreLedger::Create(store_dir, size, spill_dir);
  if (!ledger.ok()) {
    std::fprintf(stderr, "%s\n", ledger.status().ToString().c_str());
    return 1;
  }
  StoreSpiller spiller(store, *ledger, {});
  const std::string bytes(size, 'x');
  const std::string name = SharedMemoryStore::ObjectName("0123456789abcdef",
                                                         "0123456789abcdef0123456789abcdef");
  std::vector<double> floor_write, rayx_write, floor_read, rayx_read;
  for (int64_t r = 0; r < rounds; ++r) {
    auto path = store.Write(name, bytes);
    if (!path.ok()) {
      std::fprintf(stderr, "%s\n", path.status().ToString().c_str());
      return 1;
    }
    const std::string plain = spill_dir + "/plain";
    auto start = Clock::now();
    CopyPlain(*path, plain);
    floor_write.push_back(static_cast<double>(size) / Seconds(start) / 1e9);
    start = Clock::now();
    uint64_t sum = ReadPlain(plain);
    floor_read.push_back(static_cast<double>(size) / Seconds(start) / 1e9);
    ::unlink(plain.c_str());

    start = Clock::now();
    Status made = spiller.MakeRoom(size);  // the whole store: the object goes to disk
    rayx_write.push_back(static_cast<double>(size) / Seconds(start) / 1e9);
    if (!made.ok() || fs::exists(*path)) {
      std::fprintf(stderr, "not spilled: %s\n", made.ToString().c_str());
      return 1;
    }
    start = Clock::now();
    auto mapped = store.Open(*path);  // from the spill directory
    uint64_t check = Sum((*mapped)->view().data(), (*mapped)->view().size());
    rayx_read.push_back(static_cast<double>(size) / Seconds(start) / 1e9);
    if (check != sum) {
      std::fprintf(stderr, "restored bytes differ\n");
      return 1;
    }
    mapped->reset();
    store.Remove(*path);
  }
  fs::remove_all(store_dir);
  fs::remove_all(spill_dir);
  std::printf("object %lld MiB, %lld rounds, spill dir %s (medians, GB/s)\n",
              static_cast<long long>(size_mib), static_cast<long long>(rounds),
              spill_root.c_str());
  std::printf("  spill   rayx %6.2f   floor (read/write copy) %6.2f   ratio %.2fx\n",
              Median(rayx_write), Median(floor_write), Median(rayx_write) / Median(floor_write));
  std::printf("  restore rayx %6.2f   floor (read)            %6.2f   ratio %.2fx\n",
              Median(rayx_read), Median(floor_read), Median(rayx_read) / Median(floor_read));
  return 0;
}
