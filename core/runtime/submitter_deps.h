// What the task and actor submitters share: their collaborators and options.
#pragma once

#include <functional>
#include <string>

#include <boost/asio/io_context.hpp>

#include "common/clock.h"
#include "protocol/messages.h"
#include "runtime/argument_resolver.h"
#include "runtime/lease_client.h"
#include "runtime/object_table.h"
#include "runtime/worker_link.h"
#include "runtime/worker_send_queue.h"

namespace rayx::detail {

// The parts a submitter works with, owned by the Runtime (or a test) and
// outliving the submitter. All are used on the I/O thread only.
struct SubmitterDeps {
  ObjectTable& objects;
  LeaseClient& head;
  WorkerConnector& connector;
  WorkerSendQueue& send_queue;
  ArgumentResolver& resolver;
  const Clock& clock;
  boost::asio::io_context& io;
};

struct SubmitterOptions {
  JobId job_id;
  // Fills in the program workers run (executable, directory, package).
  std::function<void(protocol::RequestLeaseRequest*)> describe_program;
  // Whether this process may call other jobs' actors (it holds the cluster's
  // credential: a driver); a job's workers hold their job's only.
  bool reaches_other_jobs = true;
  // How long the calls of a worker whose connection dropped wait for the
  // head to say why before they fail as a plain crash (TaskSubmitter). 0:
  // they fail at once (the runtime waits TaskSubmitter::kLossReasonWaitMs).
  int64_t loss_reason_wait_ms = 0;
  // This process's grant to read one of its job's stored objects (named by
  // its store file's name), sent with each stored argument of a call to
  // another job's actor; unset: such arguments carry none.
  std::function<std::string(std::string_view object_name)> grant_read;
};

}  // namespace rayx::detail
