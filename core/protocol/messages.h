// The control-plane wire messages between the head, node agents and clients.
//
// Design: a message is a ZeroMQ multipart message of at least two frames,
// [Envelope][body], each one msgpack map; later frames carry raw payload bytes
// that are never copied into msgpack. The Envelope and ErrorReply layouts are
// frozen across protocol versions, so a peer of any version can always learn
// why it was refused. Every struct has one field list that drives encoding,
// decoding and debug printing (MSGPACK_DEFINE_MAP: keys are the field names, so
// fields can be added compatibly; unknown keys are ignored on decode).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <msgpack.hpp>

#include "rayx/cluster_status.h"
#include "rayx/ids.h"
#include "rayx/resources.h"
#include "rayx/status.h"
#include "rayx/version.h"

namespace rayx::protocol {

enum class MessageType : uint16_t {
  kErrorReply = 1,
  kRegisterNodeRequest = 2,
  kRegisterNodeReply = 3,
  kHeartbeatRequest = 4,
  kHeartbeatReply = 5,
  kUnregisterNodeRequest = 6,
  kUnregisterNodeReply = 7,
  kGetClusterStatusRequest = 8,
  kGetClusterStatusReply = 9,
};

// The name of a message type for logs; "unknown(N)" for values we do not know.
std::string MessageTypeName(uint16_t type);

// First frame of every message. FROZEN: never change these three fields.
struct Envelope {
  uint32_t v = kProtocolVersion;  // sender's protocol version
  uint16_t t = 0;                 // MessageType
  uint64_t id = 0;                // request id, echoed in the reply
  MSGPACK_DEFINE_MAP(v, t, id)
};

// The reply to any request that failed. FROZEN, like Envelope.
struct ErrorReply {
  uint8_t code = 0;      // StatusCode
  std::string message;   // what happened and what to do
  std::string where;     // which process said so, e.g. "head 10.0.0.1:6380"
  MSGPACK_DEFINE_MAP(code, message, where)

  Status ToStatus() const;
};

// hello from a node agent: who it is, what it offers, and the cluster token.
struct RegisterNodeRequest {
  static constexpr MessageType kType = MessageType::kRegisterNodeRequest;
  std::string token;
  std::string rayx_version;
  std::string address;   // the IP other nodes reach this node at
  std::string hostname;
  int32_t agent_pid = 0;
  bool is_head_node = false;
  ResourceMap resources;
  LabelMap labels;
  MSGPACK_DEFINE_MAP(token, rayx_version, address, hostname, agent_pid, is_head_node,
                     resources, labels)
};

struct RegisterNodeReply {
  static constexpr MessageType kType = MessageType::kRegisterNodeReply;
  NodeId node_id;
  std::string cluster_id;
  int64_t heartbeat_period_ms = 0;  // the agent heartbeats this often
  int64_t node_timeout_ms = 0;      // the head declares it dead after this silence
  MSGPACK_DEFINE_MAP(node_id, cluster_id, heartbeat_period_ms, node_timeout_ms)
};

struct HeartbeatRequest {
  static constexpr MessageType kType = MessageType::kHeartbeatRequest;
  NodeId node_id;
  uint64_t seq = 0;
  ResourceMap available;
  MSGPACK_DEFINE_MAP(node_id, seq, available)
};

struct HeartbeatReply {
  static constexpr MessageType kType = MessageType::kHeartbeatReply;
  // False when the head no longer counts the node alive (it was declared dead):
  // the agent must register again as a new node.
  bool known = true;
  MSGPACK_DEFINE_MAP(known)
};

// An agent leaving on purpose (rayx stop): marked dead at once, not after the
// heartbeat timeout.
struct UnregisterNodeRequest {
  static constexpr MessageType kType = MessageType::kUnregisterNodeRequest;
  NodeId node_id;
  std::string reason;
  MSGPACK_DEFINE_MAP(node_id, reason)
};

struct UnregisterNodeReply {
  static constexpr MessageType kType = MessageType::kUnregisterNodeReply;
  bool ok = true;
  MSGPACK_DEFINE_MAP(ok)
};

struct GetClusterStatusRequest {
  static constexpr MessageType kType = MessageType::kGetClusterStatusRequest;
  std::string token;
  MSGPACK_DEFINE_MAP(token)
};

struct GetClusterStatusReply {
  static constexpr MessageType kType = MessageType::kGetClusterStatusReply;
  ClusterStatus status;
  MSGPACK_DEFINE_MAP(status)
};

}  // namespace rayx::protocol
