// Reference counts of a node's stored objects that ObjectRefs inside values
// point at.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

#include "rayx/status.h"

namespace rayx::worker {

// An object's file in the store normally has one holder, the process that
// owns the object, which deletes it when done. Once an ObjectRef to it is put
// inside a value (a put value, a task's result, a pickle), other processes
// may read it later: each such ref is a hold counted here, and the file goes
// when the last hold is let go.
//
// The holders of a pinned file: its writer (the owner, who lets go with the
// delete it always sent: unless the file was `fresh`, written by the holder
// itself for the ref), every process that deserialized a ref to it (each lets
// go when its ref goes), and every stored value that contains a ref to it (a
// container: it lets go when its own file goes). So deleting a container
// cascades to what it holds, here, on this node: a process puts a ref inside
// a value only for a copy on its own node's store (the runtime copies one
// from another node first), so a container's contents are always local.
//
// Bounded: at most `max_pins` files are pinned (a Hold past it is
// Unavailable), and a container's contents count against the same
// budget. Not thread-safe (the agent's event loop).
class ObjectPins {
 public:
  struct Ops {
    // Whether the store holds the object at `path` (a path already checked
    // to be one of the store's).
    std::function<bool(const std::string& path)> exists;
    // Deletes it.
    std::function<void(const std::string& path)> remove;
  };
  static constexpr size_t kDefaultMaxPins = size_t{1} << 20;

  explicit ObjectPins(Ops ops, size_t max_pins = kDefaultMaxPins)
      : ops_(std::move(ops)), max_pins_(max_pins) {}

  // One more holder of `path`. The first hold of a file also counts its
  // writer unless `fresh`. NotFound when the file is gone; Unavailable
  // at the limit.
  Status Hold(const std::string& path, bool fresh);
  // The container `container` (just written by its owner) holds `contents`:
  // holds the sender took (Hold) and hands over. When the container is gone
  // already (its owner deleted it before this came), the holds are let go
  // at once. Contents that are not pinned are ignored.
  void Contain(const std::string& container, const std::vector<std::string>& contents);
  // A holder lets go of `path` (a delete). True when it is pinned: its count
  // drops, and at zero the file goes and so do the holds it had as a
  // container. False when it is not: the caller deletes it as before.
  bool Release(const std::string& path);
  // Forgets every pin of a path that starts with `prefix` (a job ended: the
  // caller removes its files). Returns how many.
  size_t ForgetPrefix(const std::string& prefix);

  // Holds on `path` (0: not pinned). For tests and status.
  uint64_t count(const std::string& path) const;
  size_t size() const { return pins_.size(); }

 private:
  struct Pin {
    uint64_t count = 0;
    std::vector<std::string> contents;  // holds this file has as a container
  };

  Ops ops_;
  size_t max_pins_;
  size_t contents_ = 0;  // the contents of every Pin, counted against max_pins_
  std::unordered_map<std::string, Pin> pins_;
};

}  // namespace rayx::worker
