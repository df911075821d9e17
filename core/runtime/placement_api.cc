// rayx::CreatePlacementGroup, PlacementGroup::Wait, RemovePlacementGroup, and
// the runtime's placement-group calls to the head.
#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <stdexcept>

#include "common/clock.h"
#include "common/logging.h"
#include "protocol/placement_messages.h"
#include "rayx/ids.h"
#include "rayx/rayx.h"
#include "runtime/api_enums.h"
#include "runtime/head_client.h"
#include "runtime/runtime.h"

namespace rayx {

namespace detail {

std::string Placement::Key() const {
  std::string key = "pg=" + placement_group_id + "/" + std::to_string(bundle_index) +
                    (group_visible_devices ? "/all" : "") + ";s=" +
                    std::to_string(static_cast<int>(strategy)) + ":" +
                    affinity_node_id + (affinity_soft ? "~" : "") + ";l=";
  for (const auto& [k, v] : label_selector) key += k + "=" + v + ",";
  if (!worker_executable.empty()) {
    key += ";x=" + worker_executable;
    for (const auto& a : worker_args) key += " " + a;
  }
  return key;
}

namespace {
PlacementGroupStatus StateOf(const protocol::PlacementGroupInfo& info) {
  return PlacementGroupStatus{info.placement_group_id.Hex(), FromWire(info.state), info.reason};
}
}  // namespace

PlacementGroupPtr Runtime::CreatePlacementGroup(const std::string& name,
                                                const std::vector<ResourceMap>& bundles,
                                                PlacementStrategy strategy,
                                                bool detached) {
  auto core = std::make_shared<PlacementGroupCore>();
  core->id = PlacementGroupId::FromSecureRandom();  // names the group to its users: a credential
  protocol::CreatePlacementGroupRequest req;
  req.job_id = config_.job_id;
  req.name = name;
  req.strategy = ToWire(strategy);
  req.bundles = bundles;
  req.detached = detached;
  req.placement_group_id = core->id;
  PostOrdered([this, req = std::move(req), core] {
    head_->Call<protocol::CreatePlacementGroupReply>(
        req, [core](Result<protocol::CreatePlacementGroupReply> r) {
          std::lock_guard<std::mutex> lock(core->mu);
          core->answered = true;
          if (r.ok()) {
            core->state = StateOf(r->group);
          } else {
            core->error = r.status();
          }
          core->cv.notify_all();
        });
  });
  return core;
}

PlacementGroupStatus Runtime::WaitPlacementGroup(const PlacementGroupPtr& group,
                                                 int64_t timeout_ms) {
  PlacementGroupStatus created;
  {
    std::unique_lock<std::mutex> lock(group->mu);
    if (!group->cv.wait_for(lock, std::chrono::milliseconds(std::max<int64_t>(timeout_ms, 0) + 10000),
                            [&] { return group->answered; })) {
      throw std::runtime_error("PlacementGroup::Wait: the head did not answer the creation");
    }
    if (!group->error.ok()) {
      if (group->error.code() == StatusCode::kInvalidArgument) {
        throw std::invalid_argument("CreatePlacementGroup: " + group->error.message());
      }
      throw std::runtime_error("CreatePlacementGroup: " + group->error.message());
    }
    created = group->state;
  }
  if (created.state != PlacementGroupState::PENDING) return created;
  protocol::WaitPlacementGroupRequest req;
  req.placement_group_id = group->id;
  req.timeout_ms = std::clamp<int64_t>(timeout_ms, 0, kLongestWaitMs);
  // The head answers by the deadline (its tick); the slack covers the trip.
  auto reply = head_->CallSync<protocol::WaitPlacementGroupReply>(req, req.timeout_ms + 10000);
  if (!reply.ok()) {
    if (reply.status().code() == StatusCode::kNotFound) {
      return PlacementGroupStatus{group->id.Hex(), PlacementGroupState::REMOVED,
                                  reply.status().message()};
    }
    throw std::runtime_error("PlacementGroup::Wait: " + reply.status().message());
  }
  return StateOf(reply->group);
}

namespace {
// How long one wait of PlacementGroupReady parks at the head before it asks again.
constexpr int64_t kReadyWaitMs = 60000;
}  // namespace

ObjectHandle Runtime::PlacementGroupReady(const PlacementGroupPtr& group, std::string ready_value) {
  ObjectHandle handle = NewPendingObject();
  ObjectId id = handle->id;
  auto value = std::make_shared<const std::string>(std::move(ready_value));
  // Ordered after the creation on the head connection, so the head knows the group.
  PostOrdered([this, id, value, group_id = group->id] { AwaitPlaced(id, group_id, value); });
  return handle;
}

void Runtime::AwaitPlaced(const ObjectId& object_id, const PlacementGroupId& group_id,
                          std::shared_ptr<const std::string> value) {
  protocol::WaitPlacementGroupRequest req;
  req.placement_group_id = group_id;
  req.timeout_ms = kReadyWaitMs;
  head_->Call<protocol::WaitPlacementGroupReply>(
      req, [this, object_id, group_id, value](Result<protocol::WaitPlacementGroupReply> r) {
        auto fail = [&](protocol::TaskErrorKind kind, const std::string& message) {
          objects_.Complete({object_id, nullptr,
                             std::make_shared<ErrorInfo>(ErrorInfo::Of(
                                 kind, message, "placement group " + group_id.Hex() + " ready")),
                             nullptr});
        };
        if (!r.ok()) {
          fail(r.status().code() == StatusCode::kNotFound
                   ? protocol::TaskErrorKind::kPlacementGroupRemoved
                   : protocol::TaskErrorKind::kPlacementGroupUnavailable,
               r.status().message());
        } else {
          switch (r->group.state) {
            case protocol::PlacementGroupState::kCreated:
              objects_.Complete({object_id, value, nullptr, nullptr});
              break;
            case protocol::PlacementGroupState::kInfeasible:
              fail(protocol::TaskErrorKind::kInfeasible, r->group.reason);
              break;
            case protocol::PlacementGroupState::kRemoved:
              fail(protocol::TaskErrorKind::kPlacementGroupRemoved,
                   "the placement group was removed before it was placed");
              break;
            case protocol::PlacementGroupState::kPending:
              AwaitPlaced(object_id, group_id, value);  // still pending: wait again
              break;
          }
        }
      });
}

void Runtime::RemovePlacementGroup(const std::string& id) {
  protocol::RemovePlacementGroupRequest req;
  req.placement_group_id = PlacementGroupId::FromWire(id);
  // Ordered with earlier calls on the I/O thread; the reply is not awaited.
  PostOrdered([this, req] {
    head_->Call<protocol::RemovePlacementGroupReply>(
        req, [id = req.placement_group_id](Result<protocol::RemovePlacementGroupReply> r) {
          if (!r.ok()) RAYX_LOG(Warning) << "removing placement group " << id << ": " << r.status();
        });
  });
}

Runtime& RequireRuntime();

PlacementGroupPtr CreatePlacementGroup(const std::string& name,
                                       const std::vector<ResourceMap>& bundles,
                                       PlacementStrategy strategy, bool detached) {
  return RequireRuntime().CreatePlacementGroup(name, bundles, strategy, detached);
}
const std::string& PlacementGroupIdOf(const PlacementGroupPtr& group) { return group->id.Hex(); }
PlacementGroupStatus WaitPlacementGroup(const PlacementGroupPtr& group, int64_t timeout_ms) {
  Runtime& runtime = RequireRuntime();
  // Each slice is a wait the head holds (InterruptScope): a second at a time.
  constexpr int64_t kSliceMs = 1000;
  const auto start = std::chrono::steady_clock::now();
  for (;;) {
    int64_t left = timeout_ms - std::chrono::duration_cast<std::chrono::milliseconds>(
                                    std::chrono::steady_clock::now() - start)
                                    .count();
    if (!HasInterruptCheck() || left <= kSliceMs) {
      return runtime.WaitPlacementGroup(group, std::max<int64_t>(left, 0));
    }
    const auto asked = std::chrono::steady_clock::now();
    PlacementGroupStatus state = runtime.WaitPlacementGroup(group, kSliceMs);
    // The head holds an undecided wait to the end of the slice; that includes
    // an infeasible group while a restarted head's nodes rejoin (it may fit
    // then): an INFEASIBLE answer that took the whole slice is asked again.
    bool held = std::chrono::steady_clock::now() - asked >= std::chrono::milliseconds(kSliceMs);
    bool undecided = state.state == PlacementGroupState::PENDING ||
                     (state.state == PlacementGroupState::INFEASIBLE && held);
    if (!undecided) return state;
    CheckInterrupt();
  }
}
void RemovePlacementGroup(const std::string& id) { RequireRuntime().RemovePlacementGroup(id); }
ObjectHandle PlacementGroupReady(const PlacementGroupPtr& group, std::string ready_value) {
  return RequireRuntime().PlacementGroupReady(group, std::move(ready_value));
}

}  // namespace detail

PlacementGroup CreatePlacementGroup(const PlacementGroupCreationOptions& options) {
  // What the head would refuse, refused here at once (creation is not awaited).
  if (options.bundles.empty()) {
    throw std::invalid_argument("CreatePlacementGroup: a placement group needs at least one bundle");
  }
  for (size_t i = 0; i < options.bundles.size(); ++i) {
    bool any = false;
    for (const auto& [name, amount] : options.bundles[i]) {
      if (!std::isfinite(amount) || amount < 0) {
        throw std::invalid_argument("CreatePlacementGroup: bundle " + std::to_string(i) +
                                    ": invalid amount of \"" + name + "\"");
      }
      any = any || amount > 0;
    }
    if (!any) {
      throw std::invalid_argument("CreatePlacementGroup: bundle " + std::to_string(i) +
                                  " is empty: every bundle must reserve some resource");
    }
  }
  PlacementGroup group;
  group.core_ = detail::CreatePlacementGroup(options.name, options.bundles,
                                             options.strategy, options.detached);
  group.id_ = detail::PlacementGroupIdOf(group.core_);
  group.state_ = PlacementGroupState::PENDING;
  group.bundles_ = options.bundles.size();
  return group;
}

bool PlacementGroup::Wait(int timeout_seconds) {
  if (id_.empty()) throw std::logic_error("PlacementGroup::Wait on a group never created");
  if (state_ != PlacementGroupState::CREATED) {
    auto state = detail::WaitPlacementGroup(core_, int64_t{timeout_seconds} * 1000);
    state_ = state.state;
    reason_ = state.reason;
  }
  if (state_ == PlacementGroupState::INFEASIBLE) {
    throw std::runtime_error("placement group " + id_.substr(0, 8) + " can never be placed: " +
                             reason_);
  }
  if (state_ == PlacementGroupState::REMOVED) {
    throw std::runtime_error("placement group " + id_.substr(0, 8) + " was removed");
  }
  return state_ == PlacementGroupState::CREATED;
}

const std::string& PlacementGroupStateName(PlacementGroupState state) {
  static const auto* names = [] {
    // Each name, then "?" for a value outside the table.
    constexpr size_t kNamed = protocol::EnumNames<protocol::PlacementGroupState>::kNames.size();
    auto* out = new std::array<std::string, kNamed + 1>;
    for (size_t i = 0; i < out->size(); ++i) {
      (*out)[i] = std::string(protocol::Name(static_cast<protocol::PlacementGroupState>(i)));
    }
    return out;  // never freed: names outlive every static user
  }();
  const auto i = static_cast<size_t>(state);
  return (*names)[std::min(i, names->size() - 1)];  // the last: "?"
}

void RemovePlacementGroup(const std::string& placement_group_id) {
  detail::RemovePlacementGroup(placement_group_id);
}

}  // namespace rayx
