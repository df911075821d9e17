// ZmqSocketLoop over a real inproc PAIR: a handler that throws costs its one
// message, never the loop (a daemon's I/O thread would otherwise end); the
// batch-end hook closes each pass.
#include "transport/zmq_socket_loop.h"

#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <stdexcept>
#include <string>
#include <vector>
#include <zmq.hpp>

namespace rayx::transport {
namespace zmq_socket_loop_test {  // this file's own (unit tests compile in batches)

TEST(ZmqSocketLoop, AHandlerThatThrowsLosesOnlyItsMessage) {
  zmq::context_t context;
  zmq::socket_t server(context, zmq::socket_type::pair);
  zmq::socket_t client(context, zmq::socket_type::pair);
  server.bind("inproc://loop-test");
  client.connect("inproc://loop-test");
  boost::asio::io_context io;
  std::vector<std::string> handled;
  ZmqSocketLoop loop(io, server, [&](Frames& frames) {
    std::string text(frames.at(0).View());
    if (text == "bad") throw std::length_error("vector too long");
    handled.push_back(text);
    if (handled.size() == 2) io.stop();
  });
  loop.Start();
  for (const char* text : {"one", "bad", "two"}) {
    client.send(zmq::buffer(std::string(text)), zmq::send_flags::none);
  }
  io.run_for(std::chrono::seconds(10));
  EXPECT_EQ(handled, (std::vector<std::string>{"one", "two"}));
}

// The batch-end hook runs after the messages of a pass, once per pass: three
// messages queued before the loop starts are one pass; a later one is another.
TEST(ZmqSocketLoop, BatchEndRunsOnceAfterEachPassThatHandledMessages) {
  zmq::context_t context;
  zmq::socket_t server(context, zmq::socket_type::pair);
  zmq::socket_t client(context, zmq::socket_type::pair);
  server.bind("inproc://batch-test");
  client.connect("inproc://batch-test");
  boost::asio::io_context io;
  std::vector<std::string> events;
  ZmqSocketLoop loop(io, server, [&](Frames& frames) {
    std::string text(frames.at(0).View());
    events.push_back(text);
    if (text == "bad") throw std::runtime_error("a handler's failure still ends its pass");
  });
  loop.SetBatchEnd([&] {
    events.push_back("end");
    if (events.size() == 4) {
      client.send(zmq::buffer(std::string("later")), zmq::send_flags::none);
    } else {
      io.stop();
    }
  });
  for (const char* text : {"one", "bad", "two"}) {
    client.send(zmq::buffer(std::string(text)), zmq::send_flags::none);
  }
  loop.Start();
  io.run_for(std::chrono::seconds(10));
  EXPECT_EQ(events, (std::vector<std::string>{"one", "bad", "two", "end", "later", "end"}));
}

}  // namespace
}  // namespace rayx::transport
