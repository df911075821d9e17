// A WorkerConnector that injects transport faults into the links of another
// one (FakeWorkerConnector in the submitters' tests): failed, dropped and
// delayed sends, and lost connections.
#pragma once

#include <deque>
#include <map>
#include <memory>
#include <string>
#include <utility>

#include "runtime/worker_link.h"

namespace rayx::detail::testing {

// Wraps `inner`: every link it makes passes sends through the faults set for
// its worker's address, set before or after the link is made. Without faults
// it is transparent. The faults model what ZeroMQ can do to a caller: a send
// refused because the peer is gone, a message lost with a connection that
// then drops, a message that arrives late (in order), a disconnect.
// Single-threaded, like the I/O thread it stands in for; `inner` must outlive it.
class FaultyWorkerConnector final : public WorkerConnector {
 public:
  explicit FaultyWorkerConnector(WorkerConnector& inner) : inner_(inner) {}

  // The next send to `address` fails, as when its socket has no peer left;
  // the link stays broken (WorkerLink's contract: nothing more is sent).
  void FailNextSend(const std::string& address) { faults_[address].fail_next = true; }
  // The next `count` sends to `address` report success but never arrive.
  void DropSends(const std::string& address, int count = 1) { faults_[address].drop += count; }
  // Sends to `address` wait until Release, which delivers them in order.
  void Hold(const std::string& address) { faults_[address].hold = true; }
  void Release(const std::string& address) {
    Faults& faults = faults_[address];
    faults.hold = false;
    std::deque<transport::Frames> held = std::move(faults.held);
    Link* link = At(address);
    for (auto& frames : held) {
      if (link) (void)link->Forward(frames);
    }
  }
  // The connection to `address` drops: the link reports its loss and fails
  // every later send.
  void Disconnect(const std::string& address) {
    if (Link* link = At(address)) link->Lose();
  }
  // Messages to `address` dropped so far.
  int dropped(const std::string& address) { return faults_[address].dropped; }

  std::unique_ptr<WorkerLink> Connect(const std::string& address, const JobId& job,
                                      const std::optional<transport::ActorKey>& actor_key,
                                      MessageHandler on_message, LostHandler on_lost) override {
    auto link = std::make_unique<Link>(this, address, std::move(on_lost));
    link->inner =
        inner_.Connect(address, job, actor_key, std::move(on_message), link->LossReporter());
    links_[address] = link.get();
    return link;
  }

 private:
  struct Faults {
    bool fail_next = false;
    int drop = 0;
    int dropped = 0;
    bool hold = false;
    std::deque<transport::Frames> held;
  };

  class Link final : public WorkerLink {
   public:
    Link(FaultyWorkerConnector* owner, std::string address, LostHandler on_lost)
        : owner_(owner), address_(std::move(address)), on_lost_(std::move(on_lost)) {}
    ~Link() override {
      auto it = owner_->links_.find(address_);
      if (it != owner_->links_.end() && it->second == this) owner_->links_.erase(it);
    }
    bool Send(transport::Frames& frames) override {
      if (broken_) return false;
      Faults& faults = owner_->faults_[address_];
      if (faults.fail_next) {
        faults.fail_next = false;
        broken_ = true;
        return false;
      }
      if (faults.drop > 0) {
        --faults.drop;
        ++faults.dropped;
        return true;
      }
      if (faults.hold) {
        faults.held.push_back(std::move(frames));
        return true;
      }
      return Forward(frames);
    }
    bool Forward(transport::Frames& frames) { return !broken_ && inner && inner->Send(frames); }
    // Reports the loss once; later sends fail.
    void Lose() {
      if (lost_reported_) return;
      broken_ = true;
      lost_reported_ = true;
      LostHandler on_lost = on_lost_;  // the owner may destroy this link
      if (on_lost) on_lost();
    }
    // The handler the inner link reports its own loss to.
    LostHandler LossReporter() {
      return [this] { Lose(); };
    }

    std::unique_ptr<WorkerLink> inner;

   private:
    FaultyWorkerConnector* owner_;
    std::string address_;
    LostHandler on_lost_;
    bool broken_ = false;
    bool lost_reported_ = false;
  };

  Link* At(const std::string& address) {
    auto it = links_.find(address);
    return it == links_.end() ? nullptr : it->second;
  }

  WorkerConnector& inner_;
  std::map<std::string, Faults> faults_;
  std::map<std::string, Link*> links_;
};

}  // namespace rayx::detail::testing
