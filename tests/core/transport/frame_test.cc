// Frame: rayx's frame type over the ZeroMQ message it holds in place.
#include "transport/frame.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>

#include <zmq.hpp>

#include "transport/zmq_frame.h"

namespace rayx::transport {
namespace frame_test {  // this file's own (unit tests compile in batches)

TEST(FrameTest, AnEmptyFrameHasNoBytes) {
  Frame frame;
  EXPECT_EQ(frame.size(), 0u);
  EXPECT_TRUE(frame.View().empty());
}

TEST(FrameTest, ACopiedFrameKeepsItsBytesWhenTheSourceChanges) {
  std::string bytes = "hello, worker";
  Frame frame(bytes);
  bytes.assign(bytes.size(), 'x');
  EXPECT_EQ(frame.View(), "hello, worker");
  EXPECT_EQ(frame.size(), 13u);
}

TEST(FrameTest, AnAdoptedStringIsNotCopied) {
  std::string bytes(100000, 'a');
  bytes[99999] = 'z';
  const char* data = bytes.data();
  Frame frame = Frame::Adopt(std::move(bytes));
  EXPECT_EQ(frame.View().data(), data) << "Adopt must hand the string's own bytes over";
  EXPECT_EQ(frame.size(), 100000u);
  EXPECT_EQ(frame.View().back(), 'z');
}

TEST(FrameTest, MovingTakesTheBytesAndLeavesTheSourceEmpty) {
  Frame a(std::string(64, 'q'));
  const char* data = a.View().data();
  Frame b(std::move(a));
  EXPECT_EQ(b.View().data(), data);
  EXPECT_EQ(a.size(), 0u);  // NOLINT(bugprone-use-after-move): the contract under test
  Frame c;
  c = std::move(b);
  EXPECT_EQ(c.View(), std::string(64, 'q'));
  EXPECT_EQ(b.size(), 0u);  // NOLINT(bugprone-use-after-move)
}

TEST(FrameTest, CopyGivesAnIndependentFrameWithTheSameBytes) {
  Frame a(std::string(1000, 'r'));
  Frame b = a.Copy();
  EXPECT_EQ(b.View(), a.View());
  a = Frame("other");
  EXPECT_EQ(b.View(), std::string(1000, 'r')) << "the copy outlives a change of the source";
}

TEST(FrameTest, FramesCrossARealSocketIntactAndInOrder) {
  zmq::context_t context(1);
  zmq::socket_t out(context, zmq::socket_type::pair);
  zmq::socket_t in(context, zmq::socket_type::pair);
  in.bind("inproc://frame-test");
  out.connect("inproc://frame-test");
  std::string big(1 << 20, 'b');
  big.front() = 'B';
  Frames frames;
  frames.push_back(MakeFrame("envelope"));
  frames.push_back(Frame());
  frames.push_back(Frame::Adopt(big));
  ASSERT_TRUE(SendFrames(out, frames));
  Frames got = ReceiveFrames(in);
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0].View(), "envelope");
  EXPECT_EQ(got[1].size(), 0u);
  EXPECT_EQ(got[2].View(), big);
}

}  // namespace
}  // namespace rayx::transport
