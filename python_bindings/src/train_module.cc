// rayx._core.train: the parts of core/group and core/train that rayx.train
// (the Python trainer) builds on: actor groups of Python actors, the rank's
// setup inside an actor, and checkpoints kept in the head's package store.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "bindings.h"
#include "collective/collective_driver.h"
#include "group/rank_setup.h"
#include "rayx/actor_group.h"
#include "rayx/collective.h"
#include "runtime/kv_client.h"
#include "train/checkpoint_shards.h"
#include "train/train_session.h"

namespace py = pybind11;

namespace rayx::python {
namespace {

// A live actor group of Python actors, in rank order.
struct PyActorGroup {
  detail::ActorGroupPtr group;
};

py::object& InfeasibleType() {
  static py::object* type = nullptr;
  return ExceptionType(type, "rayx._core.train.Infeasible", PyExc_RuntimeError);
}

py::dict RankToDict(const RankInfo& r) {
  py::dict d;
  d["rank"] = r.rank;
  d["local_rank"] = r.local_rank;
  d["local_world_size"] = r.local_world_size;
  d["node_rank"] = r.node_rank;
  d["node_ip"] = r.node_ip;
  d["gpu_ids"] = r.gpu_ids;
  d["pid"] = r.pid;
  d["world_size"] = r.world_size;
  d["device"] = r.device;
  return d;
}

// Creates `num_actors` Python actors (their creation arguments: `args`, as
// rayx._remote encodes them for "rayx.py.actor") as one actor group, then a
// Gloo collective group over them whose operations time out after
// `collective_timeout_ms`. Raises Infeasible when no set of nodes could ever
// hold the group, RuntimeError naming what failed otherwise; nothing is left
// behind when it raises.
PyActorGroup CreateGroup(const std::vector<py::bytes>& args, int num_actors,
                         const std::map<std::string, double>& resources,
                         const std::string& strategy, const std::string& collective_group,
                         int64_t timeout_ms, int64_t collective_timeout_ms,
                         bool one_device_per_rank) {
  detail::ActorGroupSpec spec;
  spec.one_device_per_rank = one_device_per_rank;
  spec.factory = "rayx.py.actor";
  for (const auto& a : args) spec.args.push_back(detail::Arg{std::string(a), nullptr});
  spec.options.num_actors = num_actors;
  spec.options.resources = ResourceMap(resources.begin(), resources.end());
  spec.options.strategy = ToPlacementStrategy(strategy);
  spec.options.collective = false;  // made below, with the trainer's own deadline
  spec.options.timeout_ms = timeout_ms;
  try {
    // Ctrl-C ends the wait for the group (up to `timeout_ms`): what was made goes.
    return RunInterruptibly([&] {
      detail::ActorGroupPtr group = detail::CreateActorGroup(std::move(spec));
      if (!collective_group.empty()) {
        collective::GroupOptions g;
        g.name = collective_group;
        g.backend = collective::Backend::kGloo;
        g.timeout_ms = collective_timeout_ms;
        try {
          collective::detail::CreateGroupOverActors(group->actors, g, /*detached=*/false);
        } catch (...) {
          detail::KillActorGroup(*group);
          throw;
        }
        group->collective_group = collective_group;
      }
      return PyActorGroup{std::move(group)};
    });
  } catch (const ActorGroupInfeasibleError& e) {
    PyErr_SetString(InfeasibleType().ptr(), e.what());
    throw py::error_already_set();
  }
}

}  // namespace

void BindTrain(py::module_& m) {
  py::module_ sub = m.def_submodule("train", "actor groups and checkpoints for rayx.train");
  sub.attr("Infeasible") = InfeasibleType();

  py::class_<PyActorGroup>(sub, "ActorGroupCore")
      .def_property_readonly("actors", [](const PyActorGroup& g) {
        std::vector<PyActor> out;
        for (const auto& a : g.group->actors) out.push_back(PyActor{a});
        return out;
      })
      .def_property_readonly("ranks", [](const PyActorGroup& g) {
        py::list out;
        for (const auto& r : g.group->ranks) out.append(RankToDict(r));
        return out;
      })
      .def_property_readonly("master_addr", [](const PyActorGroup& g) { return g.group->master_addr; })
      .def_property_readonly("master_port", [](const PyActorGroup& g) { return g.group->master_port; })
      .def_property_readonly("collective_group",
                             [](const PyActorGroup& g) { return g.group->collective_group; })
      .def_property_readonly("placement_group_id",
                             [](const PyActorGroup& g) { return g.group->placement_group_id; });

  sub.def("create_actor_group", &CreateGroup, py::arg("args"), py::arg("num_actors"),
          py::arg("resources"), py::arg("strategy"), py::arg("collective_group"),
          py::arg("timeout_ms"), py::arg("collective_timeout_ms"),
          py::arg("one_device_per_rank") = false);
  sub.def("kill_actor_group", [](const PyActorGroup& g) {
    py::gil_scoped_release release;
    detail::KillActorGroup(*g.group);
  });
  // Inside a rank: what the group's driver told it (torch's variables), or None.
  sub.def("rank_setup", []() -> py::object {
    auto setup = detail::CurrentRankSetup();
    if (!setup) return py::none();
    py::dict d = RankToDict(setup->info);
    d["world_size"] = setup->world_size;
    d["master_addr"] = setup->master_addr;
    d["master_port"] = setup->master_port;
    return d;
  });
  // Packs `dir` and keeps it in the head's package store for run `run_name`
  // (or copies it under `storage_path`); returns (the checkpoint's id, its
  // packed size in bytes).
  sub.def("store_checkpoint", [](const std::string& dir, const std::string& storage_path,
                                 const std::string& run_name) {
    train::detail::StoredCheckpoint stored;
    {
      py::gil_scoped_release release;
      stored = train::detail::StoreCheckpoint(dir, storage_path, run_name);
    }
    return py::make_tuple(stored.id, stored.bytes);
  });
  // RunConfig.storage_path: every rank copies its checkpoint into the report's
  // folder; rank 0 then commits it: (id, bytes), ("", 0) when no rank reported one.
  sub.def("copy_to_storage", [](const std::string& dir, const std::string& storage_path,
                                const std::string& run_name, const std::string& checkpoint_id) {
    py::gil_scoped_release release;
    train::detail::CopyToStorage(dir, storage_path, run_name, checkpoint_id);
  });
  sub.def("commit_storage", [](const std::string& storage_path, const std::string& run_name,
                               const std::string& checkpoint_id) {
    train::detail::StoredCheckpoint stored;
    {
      py::gil_scoped_release release;
      stored = train::detail::CommitStorage(storage_path, run_name, checkpoint_id);
    }
    return py::make_tuple(stored.id, stored.bytes);
  });
  // Rank 0, after a commit: what earlier reports never committed left behind goes.
  sub.def("sweep_uncommitted", [](const std::string& storage_path, const std::string& run_name,
                                  const std::vector<std::string>& kept,
                                  const std::string& checkpoint_id) {
    py::gil_scoped_release release;
    train::detail::SweepUncommitted(storage_path, run_name, kept, checkpoint_id);
  });
  // Run `run_name` no longer keeps checkpoint `id` (deleted once no run does).
  sub.def("drop_checkpoint", [](const std::string& id, const std::string& run_name,
                                const std::string& storage_path) {
    py::gil_scoped_release release;
    train::detail::DropCheckpoint(id, run_name, storage_path);
  });
  // (kept, dropped): `id` appended to the run's `kept` ids as the latest, and
  // the oldest beyond `num_to_keep` (0: none) taken out (the C++ trainer's rule).
  sub.def("keep_latest", [](std::vector<std::string> kept, const std::string& id,
                            int num_to_keep) {
    std::vector<std::string> dropped = train::detail::KeepLatest(kept, id, num_to_keep);
    return py::make_tuple(kept, dropped);
  });
  // Checkpoint `id` as a local directory on this node (fetched and unpacked
  // once): of a checkpoint the nodes keep, rank `rank`'s shard when it has
  // one, else (and with rank < 0) the whole checkpoint.
  sub.def("fetch_checkpoint", [](const std::string& id, const std::string& run_name,
                                 const std::string& storage_path, int rank) {
    py::gil_scoped_release release;
    return train::detail::FetchCheckpoint(id, run_name, storage_path, rank);
  }, py::arg("id"), py::arg("run_name"), py::arg("storage_path"), py::arg("rank") = -1);
  // Inside a rank: `dir` becomes this rank's shard of checkpoint
  // `checkpoint_id`, on this node's disk and `copies` - 1 others; returns its bytes.
  sub.def("store_shard", [](const std::string& dir, const std::string& run_name,
                            const std::string& checkpoint_id, int rank, int copies) {
    py::gil_scoped_release release;
    return train::detail::StoreShard(dir, run_name, checkpoint_id, rank, copies).manifest.bytes;
  });
  // Rank 0, after every rank reported: (id, bytes) of the checkpoint made of
  // the recorded shards; ("", 0) when no rank reported one.
  sub.def("commit_shards", [](const std::string& run_name, const std::string& checkpoint_id,
                              int world_size) {
    train::detail::StoredCheckpoint stored;
    {
      py::gil_scoped_release release;
      stored = train::detail::CommitShards(run_name, checkpoint_id, world_size);
    }
    return py::make_tuple(stored.id, stored.bytes);
  });
  // The checkpoints the nodes keep of run `run` (ids, oldest committed
  // first): what a fit() of that name resumes from.
  sub.def("recorded_checkpoints", [](const std::string& run) {
    std::vector<std::string> ids;
    {
      py::gil_scoped_release release;
      ids = train::detail::RecordedCheckpoints(run);
    }
    return ids;
  });
  // A run's kept checkpoints under a storage path: written by rank 0, read by
  // a later fit of the run.
  sub.def("keep_storage_index", [](const std::string& storage_path, const std::string& run,
                                   const std::vector<std::string>& kept) {
    py::gil_scoped_release release;
    train::detail::KeepStorageIndex(storage_path, run, kept);
  });
  sub.def("stored_checkpoints", [](const std::string& storage_path, const std::string& run) {
    return train::detail::StoredCheckpoints(storage_path, run);
  });
  // The attempt number a fit of run `run` whose kept checkpoints are `kept`
  // starts at (past every attempt this job reported them under).
  sub.def("first_attempt", [](const std::vector<std::string>& kept, const std::string& run,
                              const std::string& storage_path) {
    return train::detail::FirstAttempt(kept, rayx::detail::CurrentJobId(), run, storage_path);
  });
  // (id, skipped): the newest of `kept` whose every shard has a live copy
  // ("" when none), and what was passed over.
  sub.def("newest_restorable", [](const std::vector<std::string>& kept) {
    std::string skipped, id;
    {
      py::gil_scoped_release release;
      auto status = detail::CurrentClusterStatus(5000);
      if (!status.ok()) return py::make_tuple(kept.empty() ? "" : kept.back(), "");
      id = train::detail::NewestRestorable(kept, *status, &skipped);
    }
    return py::make_tuple(id, skipped);
  });
}

}  // namespace rayx::python
