// The runtime's objects: ids, entries, submissions in order, puts (inline or
// into the node's store) and releases. Part of Runtime (runtime.h).
#include <string>
#include <utility>
#include <vector>

#include "common/logging.h"
#include "object_store/object_pull.h"
#include "rayx/ids.h"
#include "runtime/actor_submitter.h"
#include "runtime/head_client.h"
#include "runtime/runtime.h"
#include "runtime/runtime_sockets.h"
#include "runtime/task_submitter.h"
#include "transport/message.h"

namespace rayx::detail {

ObjectId Runtime::NewObjectId() {
  static constexpr char kHex[] = "0123456789abcdef";
  uint64_t n = next_object_.fetch_add(1, std::memory_order_relaxed) + 1;
  std::string id = id_prefix_;
  id.resize(id_prefix_.size() + 16);
  for (int i = 15; i >= 0; --i, n >>= 4) id[id_prefix_.size() + static_cast<size_t>(i)] = kHex[n & 15];
  return ObjectId::FromWire(std::move(id));
}

ObjectHandle Runtime::NewEntry(ObjectId id) {
  auto core = std::make_shared<ObjectCore>();
  core->id = std::move(id);
  return core;
}

ObjectHandle Runtime::NewPendingObject() {
  ObjectId id = NewObjectId();
  objects_.AddPending(id);
  return NewEntry(std::move(id));
}

ObjectHandle Runtime::Submit(Submission submission) {
  if (!submitted_any_.load(std::memory_order_relaxed)) {
    submitted_any_.store(true, std::memory_order_relaxed);
  }
  ObjectHandle handle = NewEntry(NewObjectId());
  submission.task.object_id = handle->id;
  objects_.AddPendingTask(handle->id);
  bool post = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    submissions_.push_back(std::move(submission));
    post = !drain_posted_;
    drain_posted_ = true;
  }
  if (post) boost::asio::post(io_, [this] { DrainSubmissions(); });
  return handle;
}

void Runtime::PostOrdered(std::function<void()> fn) {
  Submission submission;
  submission.kind = Submission::Kind::kClosure;
  submission.closure = std::move(fn);
  bool post = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    submissions_.push_back(std::move(submission));
    post = !drain_posted_;
    drain_posted_ = true;
  }
  if (post) boost::asio::post(io_, [this] { DrainSubmissions(); });
}

void Runtime::DrainSubmissions() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    draining_.swap(submissions_);
    drain_posted_ = false;
  }
  for (Submission& s : draining_) {
    switch (s.kind) {
      case Submission::Kind::kTask:
        tasks_->Submit(s.task, s.resources, s.placement);
        break;
      case Submission::Kind::kActorCall:
        actors_->Submit(std::move(s.task));
        break;
      case Submission::Kind::kClosure:
        s.closure();
        break;
    }
  }
  draining_.clear();
  // The burst is complete: send it now rather than after other queued handlers.
  send_queue_->FlushIfDue();
}

ObjectHandle Runtime::Put(std::string bytes) {
  if (bytes.size() >= kInlineObjectLimit) {
    auto stored = PutIntoStore(bytes.size(), [&](char* out) {
      std::memcpy(out, bytes.data(), bytes.size());
    });
    if (stored.ok()) return *stored;
    if (stored.status().code() == StatusCode::kResourceExhausted) {
      throw ObjectStoreFullError(stored.status().message());
    }
  }
  return PutInMemory(std::move(bytes));
}

Status Runtime::ReserveStore(size_t size) {
  if (!ledger_ || ledger_->TryReserve(size)) return Status::OK();
  auto made = MakeRoom(sockets_->context.get(), data_security_, *object_servers_,
                       local_object_address_, size, kMakeRoomTimeoutMs);
  return made.ok() ? Status::OK() : made.status();
}

Result<ObjectHandle> Runtime::PutIntoStore(size_t size, const std::function<void(char*)>& fill) {
  if (!store_writer_) return Status::Unavailable("this machine has no object store");
  RAYX_RETURN_IF_ERROR(ReserveStore(size));
  ObjectId id = NewObjectId();
  auto buffer = store_writer_->Create(config_.job_id.Hex() + "-" + id.Hex(), size);
  if (!buffer.ok()) return buffer.status();
  try {
    fill((*buffer)->data());
  } catch (...) {
    store_writer_->Free(std::move(*buffer), /*reusable=*/false, clock_.NowMs());
    throw;
  }
  if (Status published = store_writer_->Publish(**buffer); !published.ok()) {
    store_writer_->Free(std::move(*buffer), /*reusable=*/false, clock_.NowMs());
    return published;
  }
  return PutStored(std::move(id), std::move(*buffer));
}

ObjectHandle Runtime::PutEncoded(size_t size, const std::function<void(char*)>& fill) {
  if (size >= kInlineObjectLimit) {
    auto stored = PutIntoStore(size, fill);
    if (stored.ok()) return *stored;
    // Full, with its spill disk: the value does not go to memory instead.
    if (stored.status().code() == StatusCode::kResourceExhausted) {
      throw ObjectStoreFullError(stored.status().message());
    }
  }
  // No store here, or it is full: the value stays in memory.
  std::string bytes(size, '\0');
  fill(bytes.data());
  return PutInMemory(std::move(bytes));
}

ObjectHandle Runtime::PutInMemory(std::string bytes) {
  ObjectId id = NewObjectId();
  objects_.AddValue(id, std::make_shared<const std::string>(std::move(bytes)));
  return NewEntry(std::move(id));
}

ObjectHandle Runtime::PutStored(ObjectId id, std::shared_ptr<StoreWriter::Buffer> buffer) {
  auto location = std::make_shared<protocol::ObjectLocation>();
  location->node_address = config_.node_ip;
  location->path = buffer->path();
  location->size = buffer->size();
  objects_.AddStored(id, std::move(location), std::move(buffer));
  return NewEntry(std::move(id));
}

void Runtime::Release(const ObjectId& object_id) {
  ObjectTable::Released released = objects_.Release(object_id);
  if (!released.unclaimed_items.empty() && !stopped_) {
    boost::asio::post(io_, [this, items = std::move(released.unclaimed_items)] {
      for (const auto& location : items) DeleteStored(*location);
    });
  }
  std::shared_ptr<const protocol::ObjectLocation> location = std::move(released.location);
  std::shared_ptr<StoreWriter::Buffer> written = std::move(released.written);
  bool shared_out = released.shared_out;
  if (released.pinned && location) {
    // Held at its agent for refs inside values: this process lets go of its
    // hold (the file goes with the last). Its own Put's file is never reused.
    written.reset();
    if (stopped_) return;  // the job's end removes it
    auto held = std::make_shared<protocol::ObjectLocation>(*location);
    if (held->object_address.empty()) held->object_address = local_object_address_;
    boost::asio::post(io_, [this, held] { DeleteStored(*held); });
    return;
  }
  if (written) {
    // This process's Put: its file may serve the next Put unless another
    // process may still read it (then it goes, like any other).
    if (!stopped_ && !shared_out) {
      store_writer_->Free(std::move(written), /*reusable=*/true, clock_.NowMs());
      return;
    }
    if (stopped_) return;  // the job's end removes it
    boost::asio::post(io_, [this, written = std::move(written)]() mutable {
      store_writer_->Free(std::move(written), /*reusable=*/false, clock_.NowMs());
    });
    return;
  }
  if (location && !stopped_) {
    boost::asio::post(io_, [this, location] { DeleteStored(*location); });
  }
}

}  // namespace rayx::detail
