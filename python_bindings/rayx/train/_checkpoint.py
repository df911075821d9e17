"""Checkpoints: a directory of files reported by rank 0 (or a shard by every
rank, kept by the nodes), kept by the cluster."""

import contextlib
import os
import shutil
import tempfile


class Checkpoint:
    """A directory that makes up a checkpoint.

    Reported from rank 0 with rayx.train.report(..., checkpoint=...), it is
    packed and kept by the cluster (the head's package store, or a copy under
    RunConfig.storage_path); get_checkpoint() in a resumed attempt, and
    Result.checkpoint in the driver, fetch it into a local directory on first use.
    """

    def __init__(self, path=None, *, _id=None, _run=None, _storage="", _rank=-1):
        if path is None and _id is None:
            raise ValueError("Checkpoint needs a directory: use Checkpoint.from_directory(path)")
        self._path = None if path is None else os.fspath(path)
        self._id = _id
        self._run = _run
        self._storage = _storage
        self._rank = _rank  # a rank's view of a node-kept checkpoint: its own shard

    @classmethod
    def from_directory(cls, path):
        path = os.fspath(path)
        if not os.path.isdir(path):
            raise ValueError(f"Checkpoint.from_directory: {path} is not a directory")
        return cls(path)

    @property
    def path(self):
        """The local directory holding the checkpoint's files (fetched on first
        use). Of a checkpoint the nodes keep (CheckpointConfig.num_replicas),
        in a rank: that rank's own shard when it reported one, else the whole
        checkpoint; in the driver: the whole checkpoint, in a directory that
        goes when the driver exits (to_directory(path) keeps a copy)."""
        if self._path is None:
            from rayx import _core
            self._path = _core.train.fetch_checkpoint(self._id, self._run or "run", self._storage,
                                                      self._rank)
        return self._path

    def whole_directory(self):
        """A local directory with every rank's files of a checkpoint the nodes
        keep (a file several ranks reported: the lowest rank's); for other
        checkpoints, the same as `path`."""
        if self._id is None or not self._id.startswith("nodes:"):
            return self.path
        from rayx import _core
        return _core.train.fetch_checkpoint(self._id, self._run or "run", self._storage, -1)

    @property
    def id(self):
        """Where the cluster keeps it; None until reported."""
        return self._id

    def to_directory(self, path=None):
        """Copies the checkpoint's files into `path` (default: a new temporary
        directory) and returns it."""
        if path is None:
            path = tempfile.mkdtemp(prefix="rayx-checkpoint-")
        shutil.copytree(self.path, os.fspath(path), dirs_exist_ok=True)
        return os.fspath(path)

    @contextlib.contextmanager
    def as_directory(self):
        """A local directory with the files, for reading (do not modify it)."""
        yield self.path

    @property
    def filesystem(self):
        return None  # a local directory (rayx has no pyarrow filesystems)

    # Metadata: a small JSON dict kept in the checkpoint's directory.
    _METADATA_FILE = ".metadata.json"

    def get_metadata(self):
        import json
        try:
            with open(os.path.join(self.path, self._METADATA_FILE)) as f:
                return json.load(f)
        except FileNotFoundError:
            return {}

    def set_metadata(self, metadata):
        import json
        if not isinstance(metadata, dict):
            raise TypeError("Checkpoint.set_metadata takes a dict")
        with open(os.path.join(self.path, self._METADATA_FILE), "w") as f:
            json.dump(metadata, f)

    def update_metadata(self, metadata):
        merged = self.get_metadata()
        merged.update(metadata)
        self.set_metadata(merged)

    def __eq__(self, other):
        return isinstance(other, Checkpoint) and (self._id or self._path) == (
            other._id or other._path)

    def __hash__(self):
        return hash(self._id or self._path)

    def __repr__(self):
        return f"Checkpoint({self._path or self._id})"
