// The object table: entries, waiters, Get/Wait and completion.
#include "runtime/object_table.h"

#include "runtime/api_enums.h"

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <thread>

#include "object_store/shared_memory_store.h"
#include "rayx/errors.h"

namespace rayx::detail {

ObjectTable::ObjectTable(Options options)
    : options_(std::move(options)),
      own_counters_(options_.counters ? nullptr : std::make_unique<WorkCounters>()),
      counters_(options_.counters ? *options_.counters : *own_counters_) {}

void ObjectTable::AddPending(const ObjectId& id) {
  std::lock_guard<std::mutex> lock(mu_);
  objects_.try_emplace(id.Hex());
}

void ObjectTable::AddPendingTask(const ObjectId& id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto [it, fresh] = objects_.try_emplace(id.Hex());
  if (!fresh) return;
  it->second.task = true;
  counters_.TaskSubmitted();
}

void ObjectTable::AddValue(const ObjectId& id, std::shared_ptr<const std::string> value) {
  std::lock_guard<std::mutex> lock(mu_);
  Entry& entry = objects_[id.Hex()];
  entry.state = Entry::State::kReady;
  entry.value = std::move(value);
}

void ObjectTable::AddStored(const ObjectId& id,
                            std::shared_ptr<const protocol::ObjectLocation> location,
                            std::shared_ptr<StoreWriter::Buffer> written) {
  std::lock_guard<std::mutex> lock(mu_);
  Entry& entry = objects_[id.Hex()];
  entry.state = Entry::State::kReady;
  entry.location = std::move(location);
  entry.written = std::move(written);
}

void ObjectTable::AddBorrowed(const ObjectId& id,
                              std::shared_ptr<const protocol::ObjectLocation> location) {
  std::lock_guard<std::mutex> lock(mu_);
  Entry& entry = objects_[id.Hex()];
  entry.state = Entry::State::kReady;
  entry.location = std::move(location);
  entry.pinned = true;
  entry.shared_out = true;
}

void ObjectTable::AddFailed(const ObjectId& id, ErrorInfo error) {
  std::lock_guard<std::mutex> lock(mu_);
  Entry& entry = objects_[id.Hex()];
  entry.state = Entry::State::kFailed;
  entry.error = std::make_shared<ErrorInfo>(std::move(error));
}

std::shared_ptr<const protocol::ObjectLocation> ObjectTable::PinForExport(const ObjectId& id,
                                                                          bool* written) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = objects_.find(id.Hex());
  if (it == objects_.end() || it->second.state != Entry::State::kReady || !it->second.location) {
    return nullptr;
  }
  it->second.pinned = true;
  it->second.shared_out = true;
  *written = it->second.written != nullptr;
  return it->second.location;
}

ObjectTable::Released ObjectTable::Release(const ObjectId& id) {
  Released released;
  // Destroyed after the lock: a closure may hold the last handle of another
  // object, whose release takes the lock again.
  std::function<void()> recompute;
  std::vector<std::function<void()>> failed_items;  // continuations, run after the lock
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!streams_.empty()) ReleaseStream(id.Hex(), &released, &failed_items);
    auto it = objects_.find(id.Hex());
    if (it == objects_.end()) {
      // nothing of its own to release
    } else if (it->second.state == Entry::State::kPending) {
      // Dropped when its result arrives.
      it->second.waiters.push_back(nullptr);
    } else {
      released.location = it->second.location;
      released.written = std::move(it->second.written);
      released.shared_out = it->second.shared_out;
      released.pinned = it->second.pinned;
      recompute = std::move(it->second.recompute);
      objects_.erase(it);
    }
    if (!failed_items.empty()) ends_.fetch_add(1, std::memory_order_release);
  }
  if (!failed_items.empty()) cv_.notify_all();
  for (auto& w : failed_items) w();
  return released;
}

void ObjectTable::FailItem(std::unordered_map<std::string, Entry>::iterator it,
                           const std::string& why, std::vector<std::function<void()>>* out) {
  Entry& entry = it->second;
  if (entry.state != Entry::State::kPending) return;
  entry.state = Entry::State::kFailed;
  entry.error =
      std::make_shared<ErrorInfo>(ErrorInfo::Of(protocol::TaskErrorKind::kGeneratorEnded, why));
  bool released = false;
  for (auto& w : entry.waiters) {
    if (w) {
      out->push_back(std::move(w));
    } else {
      released = true;
    }
  }
  entry.waiters.clear();
  if (released) objects_.erase(it);
}

void ObjectTable::ReleaseStream(const std::string& stream, Released* released,
                                std::vector<std::function<void()>>* out) {
  auto s = streams_.find(stream);
  if (s == streams_.end()) return;
  for (const std::string& item : s->second.unclaimed) {
    auto it = objects_.find(item);
    if (it == objects_.end()) continue;
    if (it->second.location) released->unclaimed_items.push_back(it->second.location);
    objects_.erase(it);
  }
  for (const std::string& item : s->second.claimed) {
    auto it = objects_.find(item);
    if (it != objects_.end()) FailItem(it, "its generator was released before it yielded it", out);
  }
  streams_.erase(s);
}

void ObjectTable::EndStream(const std::string& stream, const std::string& why,
                            std::vector<std::function<void()>>* out) {
  auto s = streams_.find(stream);
  if (s == streams_.end()) return;
  for (const std::string& item : s->second.claimed) {
    auto it = objects_.find(item);
    if (it != objects_.end()) FailItem(it, why, out);
  }
  s->second.claimed.clear();
  if (s->second.unclaimed.empty()) streams_.erase(s);
}

void ObjectTable::ClaimStreamItem(const ObjectId& stream, const ObjectId& item) {
  std::lock_guard<std::mutex> lock(mu_);
  Stream& s = streams_[stream.Hex()];
  if (s.unclaimed.erase(item.Hex()) > 0) {
    if (s.unclaimed.empty() && s.claimed.empty()) streams_.erase(stream.Hex());
    return;  // it arrived: the claimer's handle holds it now
  }
  auto [it, added] = objects_.try_emplace(item.Hex());  // pending until it arrives
  auto owner = objects_.find(stream.Hex());
  if (added && owner != objects_.end() && owner->second.state != Entry::State::kPending) {
    // Its generator ended: the item will not come.
    std::vector<std::function<void()>> none;
    FailItem(it, "its generator ended without yielding it", &none);
  } else if (added) {
    s.claimed.push_back(item.Hex());
  }
  if (s.unclaimed.empty() && s.claimed.empty()) streams_.erase(stream.Hex());
}

size_t ObjectTable::TEST_unclaimed_items() {
  std::lock_guard<std::mutex> lock(mu_);
  size_t n = 0;
  for (const auto& [stream, items] : streams_) n += items.unclaimed.size() + items.claimed.size();
  return n;
}

bool ObjectTable::AddStreamItem(Completion& c) {
  auto owner = objects_.find(c.stream.Hex());
  bool wanted = owner != objects_.end();
  if (wanted) {
    for (const auto& w : owner->second.waiters) wanted = wanted && w != nullptr;
  }
  if (!wanted) return false;  // its stream was released: nobody can claim it
  Entry& entry = objects_[c.id.Hex()];
  entry.state = c.error ? Entry::State::kFailed : Entry::State::kReady;
  entry.value = std::move(c.value);
  entry.error = std::move(c.error);
  entry.location = c.location;
  streams_[c.stream.Hex()].unclaimed.insert(c.id.Hex());
  return true;
}

void ObjectTable::Complete(Completion completion) {
  std::vector<Completion> one(1);
  one[0] = std::move(completion);
  CompleteAll(one);
}

void ObjectTable::CompleteAll(std::vector<Completion>& batch) {
  std::vector<std::function<void()>> continuations;
  // Replaced or dropped recompute closures, destroyed after the lock (see Release).
  std::vector<std::function<void()>> dropped;
  std::vector<std::shared_ptr<const protocol::ObjectLocation>> unwanted;
  bool wake = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (Completion& c : batch) {
      auto it = objects_.find(c.id.Hex());
      if (it == objects_.end()) {
        if (!c.stream.IsNil() && !AddStreamItem(c) && c.location) unwanted.push_back(c.location);
        continue;
      }
      Entry& entry = it->second;
      if (entry.task && entry.state == Entry::State::kPending) {
        counters_.TaskEnded(c.error != nullptr);
      }
      entry.state = c.error ? Entry::State::kFailed : Entry::State::kReady;
      entry.value = std::move(c.value);
      entry.error = std::move(c.error);
      entry.location = c.location;
      if (!streams_.empty()) {
        if (!c.stream.IsNil()) {
          // A claimed item arrived: its stream no longer waits for it.
          auto s = streams_.find(c.stream.Hex());
          if (s != streams_.end()) std::erase(s->second.claimed, c.id.Hex());
        } else {
          EndStream(c.id.Hex(), "its generator ended without yielding it", &continuations);
        }
      }
      if (entry.recompute) dropped.push_back(std::move(entry.recompute));
      entry.recompute = std::move(c.recompute);
      if (entry.waiters.empty()) continue;
      bool released = false;
      for (auto& w : entry.waiters) {
        if (w) {
          continuations.push_back(std::move(w));
        } else {
          released = true;
        }
      }
      entry.waiters.clear();
      if (released) {
        if (entry.recompute) dropped.push_back(std::move(entry.recompute));
        objects_.erase(it);
        if (c.location) unwanted.push_back(c.location);
      }
    }
    wake = waiting_ > 0;
    ends_.fetch_add(1, std::memory_order_release);  // spinning Gets are not in waiting_
  }
  batch.clear();
  if (wake) cv_.notify_all();
  if (options_.on_unwanted) {
    for (auto& location : unwanted) options_.on_unwanted(*location);  // nobody wants it any more
  }
  for (auto& w : continuations) w();
}

namespace {

// A timeout this long (over 30 years; INT64_MAX, say) is "no bound": added to
// now it would overflow into the past and time out at once.
int64_t Unbounded(int64_t timeout_ms) { return timeout_ms >= (int64_t{1} << 40) ? -1 : timeout_ms; }

}  // namespace

template <typename Done>
bool ObjectTable::Block(std::unique_lock<std::mutex>& lock, Done& done,
                        std::chrono::steady_clock::time_point deadline, int64_t timeout_ms,
                        const std::function<void()>* on_block) {
  for (;;) {
    if (on_block != nullptr) {
      lock.unlock();
      (*on_block)();
      lock.lock();
      if (done()) return true;
    }
    bool ready = true;
    ++waiting_;
    if (on_block == nullptr) {
      if (timeout_ms < 0) {
        cv_.wait(lock, done);
      } else {
        ready = cv_.wait_until(lock, deadline, done);
      }
      --waiting_;
      return ready;
    }
    auto wake = std::chrono::steady_clock::now() + std::chrono::milliseconds(kOnBlockPeriodMs);
    bool last = timeout_ms >= 0 && deadline <= wake;
    ready = cv_.wait_until(lock, last ? deadline : wake, done);
    --waiting_;
    if (ready || last) return ready;
  }
}

// Design: a sync call's result mostly comes back within ~100 us. A thread
// that sleeps on the condition variable for it pays a futex wake-up and, on a
// virtual machine, the exit of its halted vCPU on the way back: on the 2-core
// build VM that was about half of a sync call (docs/performance.md). So Get
// first watches `ends_` for up to spin_us, yielding each round (a busy machine
// runs its other threads meanwhile), checks its object under the lock when
// something ended, and only then sleeps. A Get whose object takes longer pays
// spin_us of CPU once.
template <typename Done>
bool ObjectTable::Spin(std::unique_lock<std::mutex>& lock, Done& done,
                       std::chrono::steady_clock::time_point deadline, int64_t timeout_ms) {
  auto end = std::chrono::steady_clock::now() + std::chrono::microseconds(options_.spin_us);
  if (timeout_ms >= 0) end = std::min(end, deadline);
  uint64_t seen = ends_.load(std::memory_order_acquire);
  lock.unlock();
  spinning_.fetch_add(1, std::memory_order_relaxed);
  bool ready = false;
  for (;;) {
    std::this_thread::yield();
    uint64_t now_seen = ends_.load(std::memory_order_acquire);
    if (now_seen != seen) {
      seen = now_seen;
      lock.lock();
      if ((ready = done())) break;
      lock.unlock();
    }
    if (std::chrono::steady_clock::now() >= end) {
      lock.lock();
      ready = done();
      break;
    }
  }
  spinning_.fetch_sub(1, std::memory_order_relaxed);
  return ready;
}

ObjectBytes ObjectTable::Get(const ObjectId& id, int64_t timeout_ms,
                             const std::function<void()>* on_block) {
  timeout_ms = Unbounded(timeout_ms);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  std::unique_lock<std::mutex> lock(mu_);
  // Loops only when a lost stored copy is being computed again (lineage).
  for (;;) {
    auto it = objects_.find(id.Hex());
    if (it != objects_.end() && it->second.state == Entry::State::kPending) {
      auto done = [&] {
        it = objects_.find(id.Hex());
        return it == objects_.end() || it->second.state != Entry::State::kPending;
      };
      bool ready =
          options_.spin_us > 0 && timeout_ms != 0 && Spin(lock, done, deadline, timeout_ms);
      if (!ready) ready = timeout_ms == 0 ? done() : Block(lock, done, deadline, timeout_ms, on_block);
      if (!ready) {
        throw GetTimeoutError("object " + id.Hex() + " was not ready within " +
                              std::to_string(timeout_ms) + " ms");
      }
    }
    if (it == objects_.end()) throw std::runtime_error("object " + id.Hex() + " was freed");
    Entry& entry = it->second;
    if (entry.state == Entry::State::kFailed) {
      const ErrorInfo& e = *entry.error;
      throw TaskError(FromWire(e.kind), e.type, e.message, e.function, e.node);
    }
    if (entry.value) return {*entry.value, entry.value};
    if (entry.written) {
      auto written = entry.written;
      return HandOut(lock, it->first, written, written->view(), written->path());
    }
    if (entry.mapped) {
      auto mapped = std::static_pointer_cast<const MappedObject>(entry.mapped);
      return HandOut(lock, it->first, mapped, mapped->view(), mapped->path());
    }
    auto location = entry.location;
    lock.unlock();
    // In a store: mapped in place when it is on this machine, else pulled once.
    if (location->node_address == options_.node_ip && options_.map_local) {
      auto mapped = options_.map_local(*location);
      if (mapped.ok() && (*mapped)->view().size() == location->size) {
        auto reading = ClaimForReading(*mapped, (*mapped)->path());
        std::lock_guard<std::mutex> relock(mu_);
        auto again = objects_.find(id.Hex());
        if (again != objects_.end()) {
          again->second.mapped = *mapped;
          again->second.reading = reading;
        }
        return {(*mapped)->view(), reading};
      }
    }
    if (on_block != nullptr) (*on_block)();  // a pull may take long (a large object)
    Result<std::string> pulled =
        options_.pull ? options_.pull(*location)
                      : Result<std::string>(Status::Unavailable("no object transfer configured"));
    if (pulled.ok()) {
      auto value = std::make_shared<const std::string>(std::move(*pulled));
      std::lock_guard<std::mutex> relock(mu_);
      auto again = objects_.find(id.Hex());
      if (again != objects_.end()) again->second.value = value;
      return {*value, value};
    }
    // The only copy is gone (its node died): run the task that made it again
    // while it has retries left, and wait for the new copy.
    lock.lock();
    auto again = objects_.find(id.Hex());
    if (again == objects_.end() || again->second.location != location ||
        !again->second.recompute) {
      if (again != objects_.end() && again->second.location != location) continue;  // new copy
      throw TaskError(TaskErrorKind::kObjectLost, "ObjectLost",
                      "the only copy of object " + id.Hex() + " was on node " +
                          location->node_address +
                          " and cannot be read: " + pulled.status().message() +
                          " (the task that made it has no retries left to compute it again)",
                      "Get", location->node_address);
    }
    std::function<void()> recompute = std::move(again->second.recompute);
    again->second.recompute = nullptr;
    again->second.state = Entry::State::kPending;
    again->second.location.reset();
    lock.unlock();
    recompute();
    recompute = nullptr;  // before the lock (see Release)
    lock.lock();
  }
}

ObjectBytes ObjectTable::HandOut(std::unique_lock<std::mutex>& lock, std::string key,
                                 std::shared_ptr<const void> mapping, std::string_view view,
                                 std::string path) {
  if (auto held = objects_.at(key).reading.lock()) return {view, std::move(held)};
  lock.unlock();
  std::shared_ptr<const void> reading = ClaimForReading(std::move(mapping), path);
  lock.lock();
  auto it = objects_.find(key);
  if (it != objects_.end() && it->second.reading.expired()) it->second.reading = reading;
  return {view, std::move(reading)};
}

std::vector<bool> ObjectTable::Wait(const std::vector<ObjectHandle>& objects,
                                    size_t num_returns, int64_t timeout_ms,
                                    const std::function<void()>* on_block) {
  timeout_ms = Unbounded(timeout_ms);
  std::vector<bool> ready(objects.size(), false);
  std::unique_lock<std::mutex> lock(mu_);
  auto count = [&] {
    size_t n = 0;
    for (size_t i = 0; i < objects.size(); ++i) {
      auto it = objects_.find(objects[i]->id.Hex());
      ready[i] = it == objects_.end() || it->second.state != Entry::State::kPending;
      n += ready[i] ? 1 : 0;
    }
    return n >= num_returns;
  };
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  if (!count() && timeout_ms != 0) Block(lock, count, deadline, timeout_ms, on_block);
  count();
  return ready;
}

ObjectTable::ArgState ObjectTable::ResolveArg(const ObjectId& id, std::string* bytes,
                                              protocol::ObjectLocation* location,
                                              ErrorInfo* error) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = objects_.find(id.Hex());
  if (it == objects_.end()) return ArgState::kUnknown;
  Entry& entry = it->second;
  switch (entry.state) {
    case Entry::State::kPending:
      return ArgState::kPending;
    case Entry::State::kFailed:
      *error = *entry.error;
      return ArgState::kFailed;
    case Entry::State::kReady:
      break;
  }
  if (!entry.value && entry.location) {
    // Left in its store: the worker maps or pulls it.
    entry.shared_out = true;
    *location = *entry.location;
    return ArgState::kStored;
  }
  *bytes = *entry.value;
  return ArgState::kValue;
}

ObjectTable::CopyLost ObjectTable::OnStoredCopyLost(const ObjectId& id, const std::string& path,
                                                    std::function<void()>* recompute) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = objects_.find(id.Hex());
  if (it == objects_.end()) return CopyLost::kLost;
  Entry& entry = it->second;
  if (entry.state != Entry::State::kReady || entry.value || !entry.location ||
      entry.location->path != path) {
    return CopyLost::kResolveAgain;  // computed again already, or its bytes are here
  }
  if (!entry.recompute) return CopyLost::kLost;
  *recompute = std::move(entry.recompute);
  entry.recompute = nullptr;
  entry.state = Entry::State::kPending;
  entry.location.reset();
  entry.mapped.reset();
  return CopyLost::kResolveAgain;
}

bool ObjectTable::AddWaiter(const ObjectId& id, std::function<void()> fn) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = objects_.find(id.Hex());
  if (it == objects_.end() || it->second.state != Entry::State::kPending) return false;
  it->second.waiters.push_back(std::move(fn));
  return true;
}

void ObjectTable::FailAllPending(const ErrorInfo& error) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [id, entry] : objects_) {
    if (entry.state == Entry::State::kPending) {
      if (entry.task) counters_.TaskEnded(true);
      entry.state = Entry::State::kFailed;
      entry.error = std::make_shared<ErrorInfo>(error);
    }
  }
  ends_.fetch_add(1, std::memory_order_release);
  cv_.notify_all();
}

size_t ObjectTable::DropMappingsOfSpilled(
    const std::function<bool(const std::string& path)>& in_store) {
  std::vector<std::pair<std::string, std::shared_ptr<const protocol::ObjectLocation>>> mapped;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [key, entry] : objects_) {
      if (entry.location && (entry.mapped || entry.written)) mapped.emplace_back(key, entry.location);
    }
  }
  // Looked at outside the lock: a file system call per mapped entry.
  std::vector<std::string> moved;
  for (const auto& [key, location] : mapped) {
    if (!in_store(location->path)) moved.push_back(key);
  }
  std::vector<std::shared_ptr<const void>> unmapped;  // let go outside the lock
  std::vector<std::shared_ptr<StoreWriter::Buffer>> unwritten;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (size_t i = 0; i < moved.size(); ++i) {
      auto it = objects_.find(moved[i]);
      if (it == objects_.end()) continue;
      if (it->second.mapped) unmapped.push_back(std::move(it->second.mapped));
      if (it->second.written) unwritten.push_back(std::move(it->second.written));
    }
  }
  return moved.size();
}

size_t ObjectTable::size() {
  std::lock_guard<std::mutex> lock(mu_);
  return objects_.size();
}

size_t ObjectTable::TEST_waiting() {
  std::lock_guard<std::mutex> lock(mu_);
  return waiting_;
}

}  // namespace rayx::detail
