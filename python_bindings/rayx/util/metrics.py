"""Ray's application metrics (ray.util.metrics: Counter, Gauge, Histogram).

rayx does not export application metrics: these keep their values in the
process that records them (readable with .value, for tests and logs) and
export nothing; the first one made says so once in a warning."""

import threading
import warnings

_warned = False
_lock = threading.Lock()


def _warn_once():
    global _warned
    if not _warned:
        _warned = True
        warnings.warn("rayx.util.metrics: rayx does not export application metrics; values "
                      "stay in the recording process", stacklevel=3)


class Metric:
    def __init__(self, name, description="", tag_keys=None):
        if not isinstance(name, str) or not name:
            raise ValueError("a metric needs a non-empty name")
        tag_keys = tuple(tag_keys or ())
        if not all(isinstance(k, str) for k in tag_keys):
            raise TypeError("tag_keys must be a tuple of strings")
        _warn_once()
        self._name = name
        self._description = description
        self._tag_keys = tag_keys
        self._default_tags = {}
        self._values = {}  # tags (sorted items) -> value

    @property
    def info(self):
        return {"name": self._name, "description": self._description,
                "tag_keys": self._tag_keys, "default_tags": dict(self._default_tags)}

    def set_default_tags(self, default_tags):
        for k in default_tags:
            if k not in self._tag_keys:
                raise ValueError(f"unknown tag key {k!r}: declared keys are {self._tag_keys}")
        self._default_tags = dict(default_tags)
        return self

    def _key(self, tags):
        merged = dict(self._default_tags)
        merged.update(tags or {})
        missing = [k for k in self._tag_keys if k not in merged]
        if missing:
            raise ValueError(f"metric {self._name}: missing values for tag keys {missing}")
        return tuple(sorted(merged.items()))

    def value(self, tags=None):
        """The value recorded for `tags` (rayx's: Ray has no such accessor)."""
        with _lock:
            return self._values.get(self._key(tags))


class Counter(Metric):
    def inc(self, value=1.0, tags=None):
        if value <= 0:
            raise ValueError("a Counter only goes up: value must be > 0")
        key = self._key(tags)
        with _lock:
            self._values[key] = self._values.get(key, 0.0) + value


class Gauge(Metric):
    def set(self, value, tags=None):
        key = self._key(tags)
        with _lock:
            self._values[key] = value


class Histogram(Metric):
    def __init__(self, name, description="", boundaries=None, tag_keys=None):
        super().__init__(name, description, tag_keys)
        if not boundaries or any(b <= 0 for b in boundaries):
            raise ValueError("a Histogram needs boundaries, each > 0")
        self.boundaries = list(boundaries)

    def observe(self, value, tags=None):
        key = self._key(tags)
        with _lock:
            self._values.setdefault(key, []).append(value)


__all__ = ["Counter", "Gauge", "Histogram"]
