// The object servers a process may pull from: the cluster's alive nodes', as
// the head knows them, cached.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <unordered_set>
#include <vector>

#include "common/clock.h"
#include "rayx/cluster_status.h"
#include "rayx/status.h"
#include "transport/security.h"

namespace rayx {

// Design: an object's location arrives in a message (a call's stored argument,
// a task's result), and a pull connects to the address it names. Unchecked,
// that lets any peer turn a worker into a port scanner that also waits on each
// address. So a pull first asks this directory whether the address is an
// object server of the cluster: a hash-set lookup, O(1) at any cluster size.
// An address it does not know makes it fetch the list again (the head's node
// table: a node that joined since), at most once per `min_refresh_ms`, so a
// flood of unknown addresses costs the head one query per period per process,
// not one per pull. The set holds at most `max_servers` addresses.
//
// Thread-safe: Check may be called from any thread; one fetch runs at a time
// (others wait for it and then look again).
class ObjectServerDirectory {
 public:
  // The object servers' addresses ("tcp://IP:PORT") of the cluster's alive
  // nodes now, or why they cannot be had.
  using Fetch = std::function<Result<std::vector<std::string>>()>;

  struct Options {
    int64_t min_refresh_ms = 1000;  // Default: one fetch per second at most
    size_t max_servers = 1 << 16;   // Default: 65,536 addresses kept
  };

  // `known` are addresses known without asking (this node's own server).
  // `clock` must outlive the directory.
  ObjectServerDirectory(Fetch fetch, const Clock& clock, Options options,
                        std::vector<std::string> known = {});

  // OK when `address` is an object server of the cluster. An unknown address
  // fetches the list again when the last fetch is older than min_refresh_ms.
  // InvalidArgument, naming the address, when it is still not one; the
  // fetch's error when the list could not be had.
  Status Check(const std::string& address);

  // Whether `address` is known now, without fetching: for callers that must
  // not block (a best-effort delete).
  bool IsKnown(const std::string& address) const;

  // Replaces the list (what a fetch returns), e.g. with a status the caller
  // got anyway; counts as a fetch for min_refresh_ms.
  void Set(const std::vector<std::string>& servers);

  // Fetches made so far (for tests).
  size_t fetches() const;

 private:
  void SetLocked(const std::vector<std::string>& servers);

  const Fetch fetch_;
  const Clock& clock_;
  const Options options_;
  const std::vector<std::string> known_;
  std::mutex fetch_mu_;  // held while a fetch runs; taken before mu_
  mutable std::mutex mu_;
  std::unordered_set<std::string> servers_;  // under mu_
  int64_t fetched_at_ms_ = 0;                // under mu_
  bool fetched_ = false;                     // under mu_
  size_t fetches_ = 0;                       // under mu_
};

// A Fetch that asks the head at `head_address` (host:port) for the cluster
// status, proving `security` (a worker's job credential will do), waiting at
// most `timeout_ms`.
ObjectServerDirectory::Fetch FetchObjectServersFromHead(std::string head_address,
                                                        transport::ClientSecurity security,
                                                        int64_t timeout_ms);

// The object servers of the alive nodes in `status`.
std::vector<std::string> AliveObjectServers(const ClusterStatus& status);

}  // namespace rayx
