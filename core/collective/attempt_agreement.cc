// Attempt ids of in-actor collective groups (see attempt_agreement.h).
#include "collective/attempt_agreement.h"

#include <unistd.h>

#include <cstdlib>

#include "rayx/collective.h"

namespace rayx::collective::detail {
namespace {

std::string Prefix(const GroupSpec& spec) { return spec.options.name + "/attempts/"; }

// The key holding attempt `s`'s world size: set once rank 0 opened it.
std::string WorldKey(const GroupSpec& spec, uint64_t s) {
  return Prefix(spec) + std::to_string(s) + "/world";
}

// The attempt last opened, or 0 when none was (or the value is garbage).
uint64_t Latest(const GroupSpec& spec, RendezvousStore& store) {
  auto value = store.Get(Prefix(spec) + "latest");
  if (!value || value->empty()) return 0;
  char* end = nullptr;
  uint64_t s = std::strtoull(value->c_str(), &end, 10);
  return *end == '\0' ? s : 0;
}

[[noreturn]] void Fail(const GroupSpec& spec, const std::string& why) {
  throw CollectiveError("InitCollectiveGroup('" + spec.options.name + "') rank " +
                        std::to_string(spec.rank) + ": " + why);
}

// Deletes what attempt `s` left in the store: its agreement keys and the
// group's rendezvous keys under its attempt id. Best effort: keys a failed
// delete leaves go with the job.
void Forget(const GroupSpec& spec, RendezvousStore& store, uint64_t s) {
  (void)store.DeletePrefix(Prefix(spec) + std::to_string(s) + "/");
  GroupSpec old = spec;
  old.attempt_id = "a" + std::to_string(s);
  (void)store.DeletePrefix(old.KeyPrefix());
}

// Claims this rank's place in attempt `s`: true when it got it.
bool Claim(const GroupSpec& spec, RendezvousStore& store, uint64_t s) {
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  auto claimed =
      store.SetIfAbsent(Prefix(spec) + std::to_string(s) + "/" + std::to_string(spec.rank),
                        "pid " + std::to_string(getpid()) + " on " + host);
  if (!claimed.ok()) Fail(spec, "cannot agree on an attempt: " + claimed.status().message());
  return *claimed;
}

}  // namespace

std::string AgreeOnAttempt(const GroupSpec& spec, RendezvousStore& store,
                           std::chrono::steady_clock::time_point deadline) {
  const std::string prefix = Prefix(spec);
  const std::string world = std::to_string(spec.world_size);
  if (spec.rank == 0) {
    // The only writer of "latest": each call opens a new attempt, one never
    // opened before (should "latest" read short, the opened ones are skipped).
    for (uint64_t s = Latest(spec, store) + 1;; ++s) {
      auto fresh = store.SetIfAbsent(WorldKey(spec, s), world);
      if (!fresh.ok()) Fail(spec, "cannot open an attempt: " + fresh.status().message());
      if (!*fresh) continue;
      Status pointed = store.Set(prefix + "latest", std::to_string(s));
      if (!pointed.ok()) Fail(spec, "cannot open an attempt: " + pointed.message());
      if (s > 2) Forget(spec, store, s - 2);
      if (Claim(spec, store, s)) return "a" + std::to_string(s);
      // Another process claimed rank 0 of it (two actors given rank 0): on.
    }
  }
  uint64_t s = Latest(spec, store);
  while (true) {
    if (s == 0 || store.Get(WorldKey(spec, s)) != world) {
      // Nothing opened yet, or the latest attempt is another group's of this
      // name (another world size), or one rank 0 already forgot: wait for
      // rank 0's next.
    } else if (Claim(spec, store, s)) {
      return "a" + std::to_string(s);
    }
    // Over for this rank (or not for it): rank 0 opens the next.
    Status waited = store.Wait({WorldKey(spec, s + 1)}, deadline);
    if (!waited.ok()) {
      std::string latest = s == 0 ? std::string("none was opened")
                                  : "the latest, " + std::to_string(s) +
                                        ", had this rank's place taken already (by an earlier "
                                        "call of this rank, in this process or in one it replaced)";
      Fail(spec, waited.code() == StatusCode::kTimedOut
                     ? "rank 0 did not open a new attempt of the group in time (" + latest +
                           "): every rank must call InitCollectiveGroup again, rank 0 too"
                     : "cannot agree on an attempt: " + waited.message());
    }
    s = std::max(s + 1, Latest(spec, store));
  }
}

}  // namespace rayx::collective::detail
