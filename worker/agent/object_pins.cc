// Reference counts of stored objects held by refs inside values.
#include "agent/object_pins.h"

namespace rayx::worker {

Status ObjectPins::Hold(const std::string& path, bool fresh) {
  auto it = pins_.find(path);
  if (it != pins_.end()) {
    ++it->second.count;
    return Status::OK();
  }
  if (pins_.size() + contents_ >= max_pins_) {
    return Status::Unavailable("this node holds " + std::to_string(max_pins_) +
                                     " objects for ObjectRefs inside values already");
  }
  if (!ops_.exists(path)) {
    return Status::NotFound("object " + path + " is gone (every holder let go of it, or its "
                            "job ended)");
  }
  pins_[path].count = fresh ? 1 : 2;
  return Status::OK();
}

void ObjectPins::Contain(const std::string& container, const std::vector<std::string>& contents) {
  std::vector<std::string> held;
  held.reserve(contents.size());
  for (const auto& path : contents) {
    if (pins_.count(path)) held.push_back(path);
  }
  auto it = pins_.find(container);
  if (it == pins_.end()) {
    if (!ops_.exists(container) || pins_.size() + contents_ + held.size() >= max_pins_) {
      // Gone before this came (or no room to remember): nothing will let go
      // of these holds later, so they go now.
      for (const auto& path : held) Release(path);
      return;
    }
    it = pins_.emplace(container, Pin{1, {}}).first;  // its owner's hold
  }
  contents_ += held.size();
  auto& mine = it->second.contents;
  mine.insert(mine.end(), std::make_move_iterator(held.begin()),
              std::make_move_iterator(held.end()));
}

bool ObjectPins::Release(const std::string& path) {
  auto it = pins_.find(path);
  if (it == pins_.end()) return false;
  // Iterative: a chain of containers lets go without recursion.
  std::vector<std::string> work{path};
  while (!work.empty()) {
    std::string next = std::move(work.back());
    work.pop_back();
    auto pin = pins_.find(next);
    if (pin == pins_.end()) continue;
    if (--pin->second.count > 0) continue;
    std::vector<std::string> contents = std::move(pin->second.contents);
    contents_ -= contents.size();
    pins_.erase(pin);
    ops_.remove(next);
    for (auto& c : contents) work.push_back(std::move(c));
  }
  return true;
}

size_t ObjectPins::ForgetPrefix(const std::string& prefix) {
  size_t n = 0;
  for (auto it = pins_.begin(); it != pins_.end();) {
    if (it->first.rfind(prefix, 0) == 0) {
      contents_ -= it->second.contents.size();
      it = pins_.erase(it);
      ++n;
    } else {
      ++it;
    }
  }
  // Other jobs' containers may hold refs to these: those holds now name
  // nothing, and releasing them later is a no-op.
  return n;
}

uint64_t ObjectPins::count(const std::string& path) const {
  auto it = pins_.find(path);
  return it == pins_.end() ? 0 : it->second.count;
}

}  // namespace rayx::worker
