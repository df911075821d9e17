// One frame of a wire message, as rayx's own type: code outside the transport
// builds, reads and forwards frames without seeing ZeroMQ.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace rayx::transport {

// Bytes the transport sends and receives without copying them again. A
// received frame keeps the bytes ZeroMQ read; `Adopt` hands a string's bytes
// to the transport as they are.
//
// Design: the frame holds the transport's message (a ZeroMQ message, 64 bytes)
// in place, so a frame costs no allocation of its own; only the transport's
// `zmq_frame.h` sees it as a ZeroMQ message. Move-only, like the message.
// Not thread-safe; a frame may move between threads with its owner.
class Frame {
 public:
  Frame() noexcept;  // empty
  // A copy of `bytes`.
  explicit Frame(std::string_view bytes);
  // Takes `bytes` without copying them; they are freed when the transport is
  // done with the frame.
  static Frame Adopt(std::string bytes);

  Frame(Frame&& other) noexcept;
  Frame& operator=(Frame&& other) noexcept;
  Frame(const Frame&) = delete;
  Frame& operator=(const Frame&) = delete;
  ~Frame();

  // The bytes; valid while the frame lives and is not moved from.
  std::string_view View() const noexcept;
  size_t size() const noexcept;
  // A frame with a copy of the same bytes.
  Frame Copy() const;

 private:
  friend struct FrameAccess;
  static constexpr size_t kStorageBytes = 64;
  alignas(void*) unsigned char storage_[kStorageBytes];
};

// A whole multipart message, frame by frame.
using Frames = std::vector<Frame>;

inline std::string_view FrameView(const Frame& frame) { return frame.View(); }

// A frame holding a copy of `bytes`.
inline Frame MakeFrame(std::string_view bytes) { return Frame(bytes); }

}  // namespace rayx::transport
