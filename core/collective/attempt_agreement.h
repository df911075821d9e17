// How the ranks of a group made inside actors (InitCollectiveGroup) agree on
// a fresh attempt id without a driver to pick one.
#pragma once

#include <chrono>
#include <string>

#include "collective/collective_group.h"
#include "collective/rendezvous_store.h"

namespace rayx::collective::detail {

// Returns the attempt id ("a<s>") that rank `spec.rank` of group
// `spec.options.name` joins, agreed through `store` by the keys
// "<name>/attempts/...":
//  - rank 0 opens attempt s = the last one opened + 1
//    ("<name>/attempts/<s>/world", holding the world size) and points
//    "<name>/attempts/latest" at it;
//  - every rank claims its place in the latest attempt opened for its world
//    size ("<name>/attempts/<s>/<rank>", set only if absent). A place taken
//    already (by this process in an earlier InitCollectiveGroup, or by an
//    earlier process of this rank: a restarted actor) means that attempt is
//    over for this rank: it waits for rank 0 to open the next one.
// So a rank whose process was replaced never rendezvouses on keys a finished
// attempt left, whatever the order in which the ranks call.
// Having opened attempt s, rank 0 deletes the keys of attempt s - 2
// ("<name>/attempts/<s-2>/" and its rendezvous keys, "<name>/a<s-2>/"): a
// group made again and again (a long-lived actor re-forming it) keeps at most
// two attempts' keys in the store, not every one. Attempt s - 1 is kept, so
// its ranks can still read why it failed (its abort notices).
// Throws CollectiveError when `deadline` passes first, or the store fails.
std::string AgreeOnAttempt(const GroupSpec& spec, RendezvousStore& store,
                           std::chrono::steady_clock::time_point deadline);

}  // namespace rayx::collective::detail
