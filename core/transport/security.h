// Who may connect to rayx's sockets: the cluster's and its jobs' credentials,
// and how ZeroMQ proves them when a connection opens (ZAP, PLAIN and CURVE).
//
// Design: trust is per connection, never per message. Every socket rayx binds
// is a PLAIN or CURVE server, and its ZeroMQ context runs a ZapServer that
// decides, before any message of a new connection reaches a handler, who the
// peer is: the cluster (holders of the cluster token: daemons, the CLI,
// drivers) or one job (its workers, which hold a secret derived from the token
// and the job's id, never the token itself). ZeroMQ then tags every message
// of that connection with the principal (ZAP's User-Id), which handlers read
// with PeerPrincipal. A peer that proves nothing never reaches a handler.
//
// Secrets and keys are derived, so nothing but the token has to be stored:
//   job secret      = hex(HMAC-SHA256(key = token, "rayx job secret v1:" + job))
//   PLAIN password  = hex(HMAC-SHA256(key = secret, "rayx plain v1"))
//   CURVE key pair  = crypto_box_seed_keypair(SHA-256("rayx curve v1:" + secret))
// where `secret` is the token for the cluster and the job secret for a job.
// PLAIN sends its password in the clear (a derived one: never the token or the
// job secret); CURVE also authenticates the server and encrypts everything.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "rayx/ids.h"
#include "rayx/status.h"
#include "transport/frame.h"
#include "transport/zmq_fwd.h"

namespace rayx::transport {

// Who a connection proved to be. A plain value.
struct Principal {
  enum class Kind : uint8_t { kNone, kCluster, kJob, kActorCaller };
  Kind kind = Kind::kNone;
  JobId job;      // kJob only
  ActorId actor;  // kActorCaller only: the one actor it may call

  static Principal Cluster() { return {Kind::kCluster, JobId(), ActorId()}; }
  static Principal Job(const JobId& job) { return {Kind::kJob, job, ActorId()}; }
  static Principal ActorCaller(const ActorId& actor) {
    return {Kind::kActorCaller, JobId(), actor};
  }

  bool valid() const { return kind != Kind::kNone; }
  bool is_cluster() const { return kind == Kind::kCluster; }
  bool is_job() const { return kind == Kind::kJob; }
  bool is_actor_caller() const { return kind == Kind::kActorCaller; }
  // Whether this principal may act for `job`: the cluster for any job, a job
  // for itself only, an actor's caller for none.
  bool MayActFor(const JobId& other) const {
    return is_cluster() || (is_job() && job == other);
  }

  // ZAP's User-Id: "cluster", "job:<hex>" or "actor:<hex>". The inverse gives
  // kNone for anything else.
  std::string UserId() const;
  static Principal FromUserId(std::string_view user_id);
  // For messages: "the cluster", "job <hex>", "a caller of actor <hex>", "nobody".
  std::string ToString() const;

  bool operator==(const Principal& o) const {
    return kind == o.kind && job == o.job && actor == o.actor;
  }
  bool operator!=(const Principal& o) const { return !(*this == o); }
};

// What a member of one job holds to call one actor of another job (a named
// or detached actor, or one whose handle it was given), as Ray lets any
// driver of the cluster do. The head hands it out with the actor's handle to
// any admitted job; it opens that actor's method calls on its worker and
// nothing else (no tasks, no creations, no other worker). A plain value.
//   actor secret = hex(HMAC-SHA256(key = the actor's job secret,
//                                  "rayx actor secret v1:" + actor))
struct ActorKey {
  ActorId actor;
  std::string secret;
  std::string worker_key;  // the CURVE public key the actor's worker presents (its job's)
};

// How rayx protects the sockets that carry data (workers, object servers). The
// head's socket, which carries only control messages, is always encrypted.
enum class WireSecurity : uint8_t {
  kAuthenticated,  // PLAIN: every connection proves a credential; no encryption
  kEncrypted,      // CURVE: mutual authentication and encryption
};

// A credential this process holds, and the keys derived from it. Copyable;
// empty() when the process holds none.
class Credential {
 public:
  Credential() = default;
  // The cluster's credential. REQUIRES: `token` non-empty.
  static Credential Cluster(std::string token);
  // One job's credential, from its secret (JobSecret). REQUIRES: both non-empty.
  static Credential Job(const JobId& job, std::string job_secret);
  // The secret of `job`, derived from the cluster token (64 hex digits).
  static std::string JobSecret(std::string_view token, const JobId& job);
  // A caller of one actor of another job, from the key the head gave out.
  // REQUIRES: `key.secret` non-empty.
  static Credential ActorCaller(const ActorKey& key);
  // The secret of `actor`, derived from its job's secret (64 hex digits).
  static std::string ActorSecret(std::string_view job_secret, const ActorId& actor);
  // A job's permission to read one of its stored objects (`object_name`, the
  // store file's name, `<job>-<id>`), sent with an argument to another job's
  // actor; the object server that holds the object checks it before it lets
  // that actor's worker pull it.
  static std::string ReadGrant(std::string_view job_secret, std::string_view object_name);
  // The job named by a store file's name (`<job>-<id>`), if it names one.
  static std::optional<JobId> JobOfObject(std::string_view object_name);
  // This credential's grant for the object `object_name`: empty when it cannot
  // speak for the object's job.
  std::string GrantRead(std::string_view object_name) const;
  // Whether `grant` is that grant (compared in constant time).
  bool IsReadGrant(std::string_view object_name, std::string_view grant) const;

  // The read-only credential of the head's web port (dashboard, JSON API,
  // Prometheus' bearer token), derived from the cluster token: it shows the
  // cluster and opens nothing else (64 hex digits).
  //   dashboard credential = hex(HMAC-SHA256(key = token, "rayx dashboard v1"))
  static std::string DashboardCredential(std::string_view token);
  // Whether `a` and `b` are the same secret, compared in time that depends
  // only on their lengths.
  static bool SameSecret(std::string_view a, std::string_view b);

  bool empty() const { return !principal_.valid(); }
  const Principal& principal() const { return principal_; }
  // The token (cluster) or the job secret.
  const std::string& secret() const { return secret_; }

  // The credential to present to `job`'s workers: the job's own, derived from
  // the token by the cluster; a job credential gives itself for its own job.
  // Unauthenticated for a job credential asked for another job.
  Result<Credential> ForJob(const JobId& job) const;
  // The key to call `actor`, an actor of `job`: the cluster derives any; a
  // job, its own actors'. Unauthenticated otherwise.
  Result<ActorKey> KeyFor(const JobId& job, const ActorId& actor) const;

  std::string PlainUsername() const { return principal_.UserId(); }
  const std::string& PlainPassword() const { return plain_password_; }
  // Z85 text (40 characters), as ZeroMQ's CURVE options take them.
  const std::string& CurvePublicKey() const { return curve_public_; }
  const std::string& CurveSecretKey() const { return curve_secret_; }

 private:
  Credential(Principal principal, std::string secret);

  Principal principal_;
  std::string secret_;
  std::string plain_password_;
  std::string curve_public_;
  std::string curve_secret_;
};

// What a ZAP handler is told of a connecting peer.
struct ZapRequest {
  std::string domain;
  std::string address;    // the peer's IP address
  std::string mechanism;  // "PLAIN" or "CURVE" (anything else is refused)
  std::string username;   // PLAIN
  std::string password;   // PLAIN
  std::string client_key; // CURVE: the client's public key, Z85
};

// Decides who a connecting peer is. Called on the ZapServer's thread: an
// implementation is thread-safe.
class Verifier {
 public:
  virtual ~Verifier() = default;
  // The principal the request proves, or nullopt to refuse it.
  virtual std::optional<Principal> Verify(const ZapRequest& request) const = 0;
};

// Verifies with the cluster token (the head, node agents' object servers):
// admits the cluster, and jobs this verifier was told are live. A job
// proves its derived secret (PLAIN: its password; CURVE: its public key).
// Thread-safe.
class ClusterVerifier : public Verifier {
 public:
  explicit ClusterVerifier(std::string token);

  // Admits `job`'s members from now on / no more. Cheap to repeat.
  void AllowJob(const JobId& job);
  void ForgetJob(const JobId& job);
  bool Allows(const JobId& job) const;
  std::vector<JobId> AllowedJobs() const;
  size_t allowed_jobs() const;

  std::optional<Principal> Verify(const ZapRequest& request) const override;

 private:
  const Credential cluster_;
  mutable std::mutex mu_;
  std::unordered_map<JobId, std::string> job_public_keys_;      // job -> CURVE key
  std::unordered_map<std::string, JobId> jobs_by_public_key_;  // CURVE key -> job
};

// Verifies one job's members only (a worker of that job), and, once the
// worker hosts an actor (AllowActorCallers), the callers of that actor that
// hold its key. Thread-safe.
class JobVerifier : public Verifier {
 public:
  explicit JobVerifier(Credential job);
  // From now on, callers presenting `actor`'s key are admitted too (as
  // kActorCaller principals: the worker lets them call that actor only).
  void AllowActorCallers(const ActorId& actor);
  std::optional<Principal> Verify(const ZapRequest& request) const override;

 private:
  const Credential job_;
  mutable std::mutex mu_;
  std::optional<Credential> actor_callers_;  // guarded by mu_
};

// Makes `socket` (not yet bound) a server that admits only peers its context's
// ZapServer accepts. With kEncrypted it presents `server`'s CURVE key, which
// its clients must know.
void MakeServer(zmq::socket_t& socket, WireSecurity mode, const Credential& server);

// Makes `socket` (not yet connected) a client that proves `mine`. With
// kEncrypted it also checks that the server holds the secret of
// `server_public_key` (Z85).
void MakeClient(zmq::socket_t& socket, WireSecurity mode, const Credential& mine,
                std::string_view server_public_key);

// What a client needs to connect to one server: the mechanism, its own
// credential, and (kEncrypted) the server's public key. A plain value.
struct ClientSecurity {
  WireSecurity mode = WireSecurity::kEncrypted;
  Credential credential;
  std::string server_key;  // Z85

  // The head (always encrypted): `cluster_key` is the cluster's public key
  // (Credential::Cluster(token).CurvePublicKey()).
  static ClientSecurity Head(Credential mine, std::string cluster_key) {
    return {WireSecurity::kEncrypted, std::move(mine), std::move(cluster_key)};
  }
  // A holder of the cluster token, to the head.
  static ClientSecurity ClusterToHead(const std::string& token) {
    Credential c = Credential::Cluster(token);
    std::string key = c.CurvePublicKey();
    return Head(std::move(c), std::move(key));
  }
  // A node agent's object server (its key is the cluster's).
  static ClientSecurity ObjectServer(WireSecurity mode, Credential mine, std::string cluster_key) {
    return {mode, std::move(mine), std::move(cluster_key)};
  }
};
inline void MakeClient(zmq::socket_t& socket, const ClientSecurity& security) {
  MakeClient(socket, security.mode, security.credential, security.server_key);
}

// Watches a client socket's handshakes: set up before connect, then read
// after a wait that saw no reply. Explains a server that refused this
// process's credential (or is not the cluster's) instead of a plain timeout.
class HandshakeWatch {
 public:
  // `successes`: also count the handshakes that succeeded (Succeeded), for a
  // client that reads the watch often (each event waits in a queue until read).
  HandshakeWatch(zmq::context_t& context, zmq::socket_t& socket, bool successes = false);
  ~HandshakeWatch();
  HandshakeWatch(const HandshakeWatch&) = delete;
  HandshakeWatch& operator=(const HandshakeWatch&) = delete;
  // Why the latest handshakes failed, or "" when none did (reads pending
  // events without blocking).
  std::string Failure();
  // How many handshakes have succeeded so far (with `successes`; reads
  // pending events without blocking): one more after the first is a new
  // connection (the server restarted, or the network came back).
  uint64_t Succeeded();

 private:
  void Drain();

  zmq::socket_t& socket_;
  std::unique_ptr<zmq::socket_t> monitor_;
  std::string failure_;
  uint64_t succeeded_ = 0;
};

// The principal the sender of a received frame proved (ZAP's User-Id), or
// kNone for a frame that did not come through an authenticated connection.
Principal PeerPrincipal(const Frame& frame);

// "authenticated" / "encrypted", and back (InvalidArgument for other text).
std::string_view WireSecurityName(WireSecurity mode);
Result<WireSecurity> ParseWireSecurity(std::string_view text);

}  // namespace rayx::transport
