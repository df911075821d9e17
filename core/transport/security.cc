// Credentials, ZAP and the socket options of PLAIN and CURVE.
#include "transport/security.h"

#include <sodium.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <zmq.hpp>

#include "common/logging.h"
#include "transport/zmq_frame.h"

namespace rayx::transport {

namespace {

constexpr char kJobUserPrefix[] = "job:";
constexpr char kActorUserPrefix[] = "actor:";
constexpr char kClusterUserId[] = "cluster";

std::string Hex(const unsigned char* data, size_t n) {
  static const char* kDigits = "0123456789abcdef";
  std::string out;
  out.reserve(2 * n);
  for (size_t i = 0; i < n; ++i) {
    out += kDigits[data[i] >> 4];
    out += kDigits[data[i] & 15];
  }
  return out;
}

void InitSodium() {
  if (sodium_init() < 0) std::abort();  // no entropy source: nothing can work
}

std::string HmacHex(std::string_view key, std::string_view message) {
  InitSodium();
  crypto_auth_hmacsha256_state state;
  crypto_auth_hmacsha256_init(&state, reinterpret_cast<const unsigned char*>(key.data()),
                              key.size());
  crypto_auth_hmacsha256_update(&state, reinterpret_cast<const unsigned char*>(message.data()),
                                message.size());
  unsigned char out[crypto_auth_hmacsha256_BYTES];
  crypto_auth_hmacsha256_final(&state, out);
  return Hex(out, sizeof out);
}

std::string Z85(const unsigned char* key32) {
  char text[41];
  zmq_z85_encode(text, key32, 32);
  return std::string(text, 40);
}

}  // namespace

// --- Principal ------------------------------------------------------------------

std::string Principal::UserId() const {
  switch (kind) {
    case Kind::kCluster: return kClusterUserId;
    case Kind::kJob: return kJobUserPrefix + job.Hex();
    case Kind::kActorCaller: return kActorUserPrefix + actor.Hex();
    case Kind::kNone: break;
  }
  return "";
}

Principal Principal::FromUserId(std::string_view user_id) {
  if (user_id == kClusterUserId) return Cluster();
  std::string_view prefix = kJobUserPrefix;
  if (user_id.substr(0, prefix.size()) == prefix) {
    auto job = JobId::FromHex(user_id.substr(prefix.size()));
    if (job.ok()) return Job(*job);
  }
  std::string_view actor_prefix = kActorUserPrefix;
  if (user_id.substr(0, actor_prefix.size()) == actor_prefix) {
    auto actor = ActorId::FromHex(user_id.substr(actor_prefix.size()));
    if (actor.ok() && !actor->IsNil()) return ActorCaller(*actor);
  }
  return Principal();
}

std::string Principal::ToString() const {
  switch (kind) {
    case Kind::kCluster: return "the cluster";
    case Kind::kJob: return "job " + job.Hex();
    case Kind::kActorCaller: return "a caller of actor " + actor.Hex();
    case Kind::kNone: break;
  }
  return "nobody";
}

// --- Credential -----------------------------------------------------------------

Credential::Credential(Principal principal, std::string secret)
    : principal_(std::move(principal)), secret_(std::move(secret)) {
  InitSodium();
  plain_password_ = HmacHex(secret_, "rayx plain v1");
  std::string seed_input = "rayx curve v1:" + secret_;
  unsigned char seed[crypto_box_SEEDBYTES];
  static_assert(crypto_box_SEEDBYTES == crypto_hash_sha256_BYTES);
  crypto_hash_sha256(seed, reinterpret_cast<const unsigned char*>(seed_input.data()),
                     seed_input.size());
  unsigned char pk[crypto_box_PUBLICKEYBYTES], sk[crypto_box_SECRETKEYBYTES];
  crypto_box_seed_keypair(pk, sk, seed);
  curve_public_ = Z85(pk);
  curve_secret_ = Z85(sk);
  sodium_memzero(sk, sizeof sk);
  sodium_memzero(seed, sizeof seed);
}

Credential Credential::Cluster(std::string token) {
  RAYX_CHECK(!token.empty()) << "a cluster credential needs the token";
  return Credential(Principal::Cluster(), std::move(token));
}

Credential Credential::Job(const JobId& job, std::string job_secret) {
  RAYX_CHECK(!job.IsNil() && !job_secret.empty()) << "a job credential needs a job and a secret";
  return Credential(Principal::Job(job), std::move(job_secret));
}

std::string Credential::JobSecret(std::string_view token, const JobId& job) {
  return HmacHex(token, "rayx job secret v1:" + job.Hex());
}

Credential Credential::ActorCaller(const ActorKey& key) {
  RAYX_CHECK(!key.actor.IsNil() && !key.secret.empty()) << "an actor's caller needs its key";
  return Credential(Principal::ActorCaller(key.actor), key.secret);
}

std::string Credential::ActorSecret(std::string_view job_secret, const ActorId& actor) {
  return HmacHex(job_secret, "rayx actor secret v1:" + actor.Hex());
}

std::string Credential::DashboardCredential(std::string_view token) {
  return HmacHex(token, "rayx dashboard v1");
}

bool Credential::SameSecret(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  return sodium_memcmp(a.data(), b.data(), a.size()) == 0;
}

std::string Credential::ReadGrant(std::string_view job_secret, std::string_view object_name) {
  return HmacHex(job_secret, "rayx read grant v1:" + std::string(object_name));
}

std::optional<JobId> Credential::JobOfObject(std::string_view object_name) {
  if (object_name.size() <= JobId::kHexDigits || object_name[JobId::kHexDigits] != '-') {
    return std::nullopt;
  }
  auto job = JobId::FromHex(object_name.substr(0, JobId::kHexDigits));
  if (!job.ok() || job->IsNil()) return std::nullopt;
  return *job;
}

std::string Credential::GrantRead(std::string_view object_name) const {
  auto job = JobOfObject(object_name);
  if (!job) return "";
  auto mine = ForJob(*job);
  if (!mine.ok()) return "";
  return ReadGrant(mine->secret(), object_name);
}

bool Credential::IsReadGrant(std::string_view object_name, std::string_view grant) const {
  std::string want = GrantRead(object_name);
  return !want.empty() && SameSecret(grant, want);
}

Result<ActorKey> Credential::KeyFor(const JobId& job, const ActorId& actor) const {
  auto member = ForJob(job);
  if (!member.ok()) return member.status();
  return ActorKey{actor, ActorSecret(member->secret(), actor), member->CurvePublicKey()};
}

Result<Credential> Credential::ForJob(const JobId& job) const {
  if (principal_.is_cluster()) return Job(job, JobSecret(secret_, job));
  if (principal_.is_job() && principal_.job == job) return *this;
  return Status::Unauthenticated(principal_.ToString() + " cannot act for job " + job.Hex() +
                                 ": a job's workers reach only their own job's workers");
}

// --- Verifiers ------------------------------------------------------------------

ClusterVerifier::ClusterVerifier(std::string token) : cluster_(Credential::Cluster(std::move(token))) {}

void ClusterVerifier::AllowJob(const JobId& job) {
  if (job.IsNil()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (job_public_keys_.count(job)) return;
  }
  // Deriving the key (~50 us) happens outside the lock.
  std::string key = Credential::Job(job, Credential::JobSecret(cluster_.secret(), job)).CurvePublicKey();
  std::lock_guard<std::mutex> lock(mu_);
  if (job_public_keys_.emplace(job, key).second) jobs_by_public_key_.emplace(key, job);
}

void ClusterVerifier::ForgetJob(const JobId& job) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = job_public_keys_.find(job);
  if (it == job_public_keys_.end()) return;
  jobs_by_public_key_.erase(it->second);
  job_public_keys_.erase(it);
}

bool ClusterVerifier::Allows(const JobId& job) const {
  std::lock_guard<std::mutex> lock(mu_);
  return job_public_keys_.count(job) > 0;
}

std::vector<JobId> ClusterVerifier::AllowedJobs() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<JobId> out;
  out.reserve(job_public_keys_.size());
  for (const auto& [job, key] : job_public_keys_) out.push_back(job);
  return out;
}

size_t ClusterVerifier::allowed_jobs() const {
  std::lock_guard<std::mutex> lock(mu_);
  return job_public_keys_.size();
}

std::optional<Principal> ClusterVerifier::Verify(const ZapRequest& request) const {
  if (request.mechanism == "CURVE") {
    if (Credential::SameSecret(request.client_key, cluster_.CurvePublicKey())) return Principal::Cluster();
    std::lock_guard<std::mutex> lock(mu_);
    auto it = jobs_by_public_key_.find(request.client_key);
    if (it != jobs_by_public_key_.end()) return Principal::Job(it->second);
    return std::nullopt;
  }
  if (request.mechanism != "PLAIN") return std::nullopt;
  Principal claimed = Principal::FromUserId(request.username);
  if (claimed.is_cluster()) {
    if (Credential::SameSecret(request.password, cluster_.PlainPassword())) return claimed;
    return std::nullopt;
  }
  if (!claimed.is_job() || !Allows(claimed.job)) return std::nullopt;
  std::string want = HmacHex(Credential::JobSecret(cluster_.secret(), claimed.job), "rayx plain v1");
  if (Credential::SameSecret(request.password, want)) return claimed;
  return std::nullopt;
}

JobVerifier::JobVerifier(Credential job) : job_(std::move(job)) {
  RAYX_CHECK(job_.principal().is_job()) << "a JobVerifier needs a job credential";
}

void JobVerifier::AllowActorCallers(const ActorId& actor) {
  Credential callers = Credential::ActorCaller(
      ActorKey{actor, Credential::ActorSecret(job_.secret(), actor), job_.CurvePublicKey()});
  std::lock_guard<std::mutex> lock(mu_);
  actor_callers_ = std::move(callers);
}

std::optional<Principal> JobVerifier::Verify(const ZapRequest& request) const {
  std::optional<Credential> callers;
  {
    std::lock_guard<std::mutex> lock(mu_);
    callers = actor_callers_;
  }
  const Credential* admitted[] = {&job_, callers ? &*callers : nullptr};
  for (const Credential* c : admitted) {
    if (c == nullptr) continue;
    if (request.mechanism == "CURVE" && Credential::SameSecret(request.client_key, c->CurvePublicKey())) {
      return c->principal();
    }
    if (request.mechanism == "PLAIN" && request.username == c->PlainUsername() &&
        Credential::SameSecret(request.password, c->PlainPassword())) {
      return c->principal();
    }
  }
  return std::nullopt;
}

// --- Socket options -------------------------------------------------------------

void MakeServer(zmq::socket_t& socket, WireSecurity mode, const Credential& server) {
  // A domain makes libzmq ask ZAP even where a mechanism might not.
  socket.set(zmq::sockopt::zap_domain, "rayx");
  if (mode == WireSecurity::kEncrypted) {
    socket.set(zmq::sockopt::curve_server, 1);
    socket.set(zmq::sockopt::curve_secretkey, server.CurveSecretKey());
  } else {
    socket.set(zmq::sockopt::plain_server, 1);
  }
}

void MakeClient(zmq::socket_t& socket, WireSecurity mode, const Credential& mine,
                std::string_view server_public_key) {
  if (mine.empty()) return;  // proves nothing: every rayx server refuses it
  if (mode == WireSecurity::kEncrypted) {
    socket.set(zmq::sockopt::curve_serverkey, std::string(server_public_key));
    socket.set(zmq::sockopt::curve_publickey, mine.CurvePublicKey());
    socket.set(zmq::sockopt::curve_secretkey, mine.CurveSecretKey());
  } else {
    socket.set(zmq::sockopt::plain_username, mine.PlainUsername());
    socket.set(zmq::sockopt::plain_password, mine.PlainPassword());
  }
}

HandshakeWatch::HandshakeWatch(zmq::context_t& context, zmq::socket_t& socket, bool successes)
    : socket_(socket) {
  std::string endpoint = "inproc://rayx-handshake-" + ::rayx::detail::RandomHex(8);
  zmq_socket_monitor(socket_.handle(), endpoint.c_str(),
                     ZMQ_EVENT_HANDSHAKE_FAILED_AUTH | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
                         ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL |
                         (successes ? ZMQ_EVENT_HANDSHAKE_SUCCEEDED : 0));
  monitor_ = std::make_unique<zmq::socket_t>(context, zmq::socket_type::pair);
  monitor_->set(zmq::sockopt::linger, 0);
  monitor_->connect(endpoint);
}

HandshakeWatch::~HandshakeWatch() {
  // libzmq sends monitor events with a blocking send: stop them before the
  // reader goes.
  if (socket_.handle() != nullptr) zmq_socket_monitor(socket_.handle(), nullptr, 0);
  monitor_->close();
}

std::string HandshakeWatch::Failure() {
  Drain();
  return failure_;
}

uint64_t HandshakeWatch::Succeeded() {
  Drain();
  return succeeded_;
}

void HandshakeWatch::Drain() {
  while (auto event = ReceiveMonitorEvent(*monitor_)) {
    const uint32_t value = event->value;
    if (event->id == ZMQ_EVENT_HANDSHAKE_SUCCEEDED) {
      ++succeeded_;
    } else if (event->id == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH) {
      failure_ = "it refused this process's credential (ZAP status " + std::to_string(value) +
                 "): is the cluster token right, and is the job still running?";
    } else {
      failure_ = "the security handshake failed: is the cluster token right? (another token "
                 "expects another cluster's key) Else the address is not this cluster's, or it "
                 "runs another rayx version";
    }
  }
}

Principal PeerPrincipal(const Frame& frame) {
  const char* user_id = zmq_msg_gets(
      const_cast<zmq_msg_t*>(FrameAccess::Message(frame).handle()), "User-Id");
  if (user_id == nullptr) return Principal();
  return Principal::FromUserId(user_id);
}

std::string_view WireSecurityName(WireSecurity mode) {
  return mode == WireSecurity::kEncrypted ? "encrypted" : "authenticated";
}

Result<WireSecurity> ParseWireSecurity(std::string_view text) {
  if (text == "encrypted") return WireSecurity::kEncrypted;
  if (text == "authenticated") return WireSecurity::kAuthenticated;
  return Status::InvalidArgument("wire security '" + std::string(text.substr(0, 40)) +
                                 "' is not 'authenticated' or 'encrypted'");
}

}  // namespace rayx::transport
