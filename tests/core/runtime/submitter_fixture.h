// The base fixture of the submitters' unit tests: what both submitters run on.
#pragma once

#include <string>

#include <boost/asio/io_context.hpp>
#include <gtest/gtest.h>

#include "common/clock.h"
#include "faulty_worker_connector.h"
#include "rayx/errors.h"
#include "runtime/argument_resolver.h"
#include "runtime/object_table.h"
#include "runtime/worker_send_queue.h"
#include "submitter_fakes.h"

namespace rayx::detail::testing {

// "a"_id: an object id for these tests (the runtime takes any id its owner made).
inline ObjectId operator""_id(const char* text, size_t size) {
  return ObjectId::FromWire(std::string(text, size));
}

// One io_context the test steps by hand, a manual clock, the object table, a
// fake head and fake workers reached through a FaultyWorkerConnector (no
// faults unless a test sets them), for job "job-1". A derived fixture adds
// its submitter, built from these members.
class SubmitterFixture : public ::testing::Test {
 protected:
  // `object_address`: this node's object server, as the argument resolver
  // knows it ("" when the test stores no arguments).
  explicit SubmitterFixture(const std::string& object_address)
      : objects_(ObjectTable::Options{}),
        send_queue_(io_, "job-1"),
        resolver_(objects_, io_, object_address) {}

  // Runs every handler that is ready (the I/O thread's turn), without blocking.
  void Step() {
    io_.restart();
    io_.poll();
  }
  // The error type a failed result throws, or "" when it is ready.
  std::string ErrorOf(const ObjectId& id) {
    try {
      objects_.Get(id, 0);
      return "";
    } catch (const TaskError& e) {
      return e.type();
    }
  }
  // True while the result has not arrived (neither a value nor an error).
  bool Pending(const ObjectId& id) {
    try {
      objects_.Get(id, 0);
    } catch (const GetTimeoutError&) {
      return true;
    } catch (const TaskError&) {
    }
    return false;
  }
  // The remote message of a failed result, or "" when it is ready.
  std::string MessageOf(const ObjectId& id) {
    try {
      objects_.Get(id, 0);
      return "";
    } catch (const TaskError& e) {
      return e.remote_message();
    }
  }

  boost::asio::io_context io_;
  ManualClock clock_;
  ObjectTable objects_;
  FakeHead head_;
  FakeWorkerConnector connector_;
  FaultyWorkerConnector faults_{connector_};  // the submitter's connector
  WorkerSendQueue send_queue_;
  ArgumentResolver resolver_;
  int next_ = 0;
};

}  // namespace rayx::detail::testing
