// Frame over a ZeroMQ message held in place.
#include "transport/frame.h"

#include "transport/zmq_frame.h"

namespace rayx::transport {

static_assert(sizeof(zmq::message_t) <= sizeof(Frame),
              "Frame's storage must hold a zmq::message_t");
static_assert(alignof(zmq::message_t) <= alignof(Frame),
              "Frame's storage must be aligned for a zmq::message_t");

Frame::Frame() noexcept { new (storage_) zmq::message_t(); }

Frame::Frame(std::string_view bytes) {
  new (storage_) zmq::message_t(bytes.data(), bytes.size());
}

Frame Frame::Adopt(std::string bytes) {
  auto* owned = new std::string(std::move(bytes));
  return FrameAccess::FromMessage(zmq::message_t(
      owned->data(), owned->size(),
      [](void*, void* hint) { delete static_cast<std::string*>(hint); }, owned));
}

Frame::Frame(Frame&& other) noexcept {
  new (storage_) zmq::message_t(std::move(FrameAccess::Message(other)));
}

Frame& Frame::operator=(Frame&& other) noexcept {
  FrameAccess::Message(*this) = std::move(FrameAccess::Message(other));
  return *this;
}

Frame::~Frame() { FrameAccess::Message(*this).~message_t(); }

std::string_view Frame::View() const noexcept {
  const zmq::message_t& m = FrameAccess::Message(*this);
  return {static_cast<const char*>(m.data()), m.size()};
}

size_t Frame::size() const noexcept { return FrameAccess::Message(*this).size(); }

Frame Frame::Copy() const {
  // ZeroMQ shares a large message's bytes by reference count, which it
  // updates through the source: the bytes themselves are not changed.
  zmq::message_t copy;
  copy.copy(const_cast<zmq::message_t&>(FrameAccess::Message(*this)));
  return FrameAccess::FromMessage(std::move(copy));
}

}  // namespace rayx::transport
