// Wire messages for submitted jobs (rayx job) and their working directories.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <msgpack.hpp>

#include "protocol/messages.h"

namespace rayx::protocol {

// True once a job has ended (SUCCEEDED, FAILED or STOPPED): its state no
// longer changes.
constexpr bool Ended(JobState state) {
  return state == JobState::kSucceeded || state == JobState::kFailed ||
         state == JobState::kStopped;
}

// A submitted job as the head keeps it.
struct JobInfo {
  std::string submission_id;
  JobId job_id;
  JobState state = JobState::kPending;
  std::vector<std::string> entrypoint;
  std::string package_hash;
  std::string message;       // why it failed or stopped
  int32_t exit_code = 0;     // of the entrypoint, once it ended
  int64_t submitted_at_ms = 0;
  int64_t ended_at_ms = 0;
  // Where the entrypoint runs (for its logs).
  std::string node_address;
  std::string object_address;
  LeaseId lease_id;
  int32_t pid = 0;
  MSGPACK_DEFINE_MAP(submission_id, job_id, state, entrypoint, package_hash, message, exit_code,
                     submitted_at_ms, ended_at_ms, node_address, object_address, lease_id, pid)
};

struct SubmitJobRequest {
  static constexpr MessageType kType = MessageType::kSubmitJobRequest;
  std::string token;
  std::string submission_id;  // "" = the head picks one
  std::vector<std::string> entrypoint;
  std::map<std::string, std::string> env;
  std::string package_hash;   // "" = no working directory
  MSGPACK_DEFINE_MAP(token, submission_id, entrypoint, env, package_hash)
};

struct SubmitJobReply {
  static constexpr MessageType kType = MessageType::kSubmitJobReply;
  JobInfo job;
  MSGPACK_DEFINE_MAP(job)
};

struct GetJobRequest {
  static constexpr MessageType kType = MessageType::kGetJobRequest;
  std::string token;
  std::string submission_id;
  MSGPACK_DEFINE_MAP(token, submission_id)
};

struct GetJobReply {
  static constexpr MessageType kType = MessageType::kGetJobReply;
  JobInfo job;
  MSGPACK_DEFINE_MAP(job)
};

struct ListJobsRequest {
  static constexpr MessageType kType = MessageType::kListJobsRequest;
  std::string token;
  MSGPACK_DEFINE_MAP(token)
};

struct ListJobsReply {
  static constexpr MessageType kType = MessageType::kListJobsReply;
  std::vector<JobInfo> jobs;
  MSGPACK_DEFINE_MAP(jobs)
};

struct StopJobRequest {
  static constexpr MessageType kType = MessageType::kStopJobRequest;
  std::string token;
  std::string submission_id;
  MSGPACK_DEFINE_MAP(token, submission_id)
};

struct StopJobReply {
  static constexpr MessageType kType = MessageType::kStopJobReply;
  JobInfo job;
  MSGPACK_DEFINE_MAP(job)
};

struct HasPackageRequest {
  static constexpr MessageType kType = MessageType::kHasPackageRequest;
  std::string token;
  std::string hash;
  MSGPACK_DEFINE_MAP(token, hash)
};

struct HasPackageReply {
  static constexpr MessageType kType = MessageType::kHasPackageReply;
  bool present = false;
  uint64_t max_bytes = 0;  // the largest package the head accepts
  MSGPACK_DEFINE_MAP(present, max_bytes)
};

// One chunk of a package (a tar archive); the bytes follow in frame 2. Chunks
// come in order; the last one completes it and the head checks the hash.
struct PutPackageRequest {
  static constexpr MessageType kType = MessageType::kPutPackageRequest;
  std::string token;
  std::string hash;
  uint64_t offset = 0;
  uint64_t total_size = 0;
  MSGPACK_DEFINE_MAP(token, hash, offset, total_size)
};

struct PutPackageReply {
  static constexpr MessageType kType = MessageType::kPutPackageReply;
  bool complete = false;
  MSGPACK_DEFINE_MAP(complete)
};

// agent -> head: a chunk of a package; the bytes follow in frame 2.
struct GetPackageRequest {
  static constexpr MessageType kType = MessageType::kGetPackageRequest;
  std::string hash;
  uint64_t offset = 0;
  uint64_t length = 0;
  // Needed unless the sender registered with the token (a node agent).
  std::string token;
  MSGPACK_DEFINE_MAP(hash, offset, length, token)
};

struct GetPackageReply {
  static constexpr MessageType kType = MessageType::kGetPackageReply;
  std::string hash;
  uint64_t offset = 0;
  uint64_t total_size = 0;
  MSGPACK_DEFINE_MAP(hash, offset, total_size)
};

// `owner` (e.g. a Train run) keeps a package, or lets go of it. A package
// that every keeper let go of is deleted, unless a job that has not ended runs
// in it; a package nobody ever kept (a job's working directory) stays.
struct KeepPackageRequest {
  static constexpr MessageType kType = MessageType::kKeepPackageRequest;
  std::string token;
  std::string hash;
  std::string owner;
  bool keep = true;
  MSGPACK_DEFINE_MAP(token, hash, owner, keep)
};

struct KeepPackageReply {
  static constexpr MessageType kType = MessageType::kKeepPackageReply;
  bool deleted = false;  // nobody keeps it any more and it was removed
  MSGPACK_DEFINE_MAP(deleted)
};

}  // namespace rayx::protocol
