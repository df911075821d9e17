"""How Python values travel: pickle protocol 5 with out-of-band buffers.

A serialized value is one blob:

    header   "RXP1", flags (u8: 0 value, 1 error, 3 an error the task's
             retry_exceptions covers), 3 reserved bytes,
             buffer count (u32), pickle length (u64),
             then (offset u64, length u64) per buffer
    pickle   the pickle stream (protocol 5), right after the header
    buffers  each out-of-band buffer (a numpy array's data, bytes-like
             objects), at a 64-byte aligned offset

Large blobs go to the node's shared-memory store; `deserialize` over the
store's read-only mapping gives arrays that point into it (no copy), kept alive
by the memoryviews they hold.
"""

import io
import pickle
import struct

_MAGIC = b"RXP1"
_HEAD = struct.Struct("<4sB3xIQ")
_SPAN = struct.Struct("<QQ")
_ALIGN = 64
# Buffers smaller than this stay inside the pickle stream.
_OUT_OF_BAND_MIN = 2048

FLAG_VALUE = 0
FLAG_ERROR = 1
# With FLAG_ERROR: the caller may run the task again (retry_exceptions). The
# C++ runtime retries a result that starts with b"RXP1\x03".
FLAG_RETRIABLE = 2


def _align(n):
    return (n + _ALIGN - 1) // _ALIGN * _ALIGN


def _pickler_class():
    import cloudpickle

    class Pickler(cloudpickle.CloudPickler):
        def __init__(self, file, buffer_callback, on_ref):
            super().__init__(file, protocol=5, buffer_callback=buffer_callback)
            self._on_ref = on_ref

        def persistent_id(self, obj):
            # The class's attribute: an actor handle answers any attribute.
            if self._on_ref is not None and getattr(type(obj), "_rayx_object_ref", False):
                return self._on_ref(obj)
            return None

    return Pickler


_PICKLER = None


def _dumps(value, on_ref):
    """Returns (pickle bytes, [out-of-band buffers as memoryviews])."""
    global _PICKLER
    if _PICKLER is None:
        _PICKLER = _pickler_class()
    buffers = []

    def keep(pb):
        try:
            raw = pb.raw()
        except BufferError:
            return True  # not contiguous: in-band
        if raw.nbytes < _OUT_OF_BAND_MIN:
            return True
        buffers.append(raw)
        return False

    # Fast path: the C pickler, for values made only of builtin types and numpy
    # arrays. Anything else (functions, classes and their instances, which may
    # live in __main__ and must then travel by value) goes through cloudpickle.
    if _plain(value, 0):
        return memoryview(pickle.dumps(value, protocol=5, buffer_callback=keep)), buffers
    out = io.BytesIO()
    try:
        _PICKLER(out, keep, on_ref).dump(value)
    except Exception as e:  # noqa: BLE001 - re-raised with the path that failed
        raise TypeError(_describe_unpicklable(value, e)) from e
    return out.getbuffer(), buffers


_SCALARS = frozenset([int, float, bool, str, bytes, type(None), complex])
_CONTAINERS = frozenset([list, tuple, dict, set, frozenset])


def _builtin(value, depth):
    """True for values made only of builtin scalars and small builtin
    containers of them: the C pickler serializes them exactly as cloudpickle
    would, and they hold no buffer that could travel out of band."""
    t = type(value)
    if t in _SCALARS:
        return True
    if depth >= 3 or t not in _CONTAINERS or len(value) > 64:
        return False
    if t is dict:
        for k, v in value.items():
            if type(k) not in _SCALARS and not _builtin(k, depth + 1):
                return False
            if type(v) not in _SCALARS and not _builtin(v, depth + 1):
                return False
        return True
    for v in value:
        if type(v) not in _SCALARS and not _builtin(v, depth + 1):
            return False
    return True


def _plain(value, depth):
    """True for values the C pickler serializes exactly as cloudpickle would:
    builtin scalars, numpy arrays, and small builtin containers of them."""
    t = type(value)
    if t in _SCALARS:
        return True
    if t.__module__ == "numpy" and t.__name__ in ("ndarray", "float64", "float32", "int64",
                                                   "int32", "bool_"):
        return getattr(value, "dtype", None) is None or value.dtype.hasobject is False
    if t in _CONTAINERS and depth < 3 and len(value) <= 64:
        items = value.items() if t is dict else ((v, None) for v in value)
        return all(_plain(k, depth + 1) and (v is None or _plain(v, depth + 1))
                   for k, v in items)
    return False


def _describe_unpicklable(value, error):
    """Names the attribute path of the first part of `value` that cannot be
    pickled (e.g. "value.model.lock: cannot pickle '_thread.lock' object")."""
    path = _find_unpicklable(value, "value", set(), 0)
    where = path if path else "value"
    return f"cannot serialize {type(value).__name__}: {where} is not picklable ({error})"


def _find_unpicklable(obj, path, seen, depth):
    if depth > 8 or id(obj) in seen:
        return None
    seen.add(id(obj))
    children = []
    if isinstance(obj, dict):
        children = [(f"{path}[{k!r}]", v) for k, v in obj.items()]
    elif isinstance(obj, (list, tuple, set, frozenset)):
        children = [(f"{path}[{i}]", v) for i, v in enumerate(obj)]
    elif hasattr(obj, "__dict__") and not isinstance(obj, type):
        children = [(f"{path}.{k}", v) for k, v in vars(obj).items()]
    for child_path, child in children:
        found = _find_unpicklable(child, child_path, seen, depth + 1)
        if found:
            return found
    for child_path, child in children:
        try:
            _dumps_plain(child)
        except Exception:  # noqa: BLE001
            return child_path
    return None


def _dumps_plain(value):
    global _PICKLER
    if _PICKLER is None:
        _PICKLER = _pickler_class()
    _PICKLER(io.BytesIO(), None, None).dump(value)


def layout(value, flags=FLAG_VALUE, on_ref=None):
    """Serializes `value`: returns (total size, [(offset, buffer), ...])."""
    data, buffers = _dumps(value, on_ref)
    head_len = _HEAD.size + _SPAN.size * len(buffers)
    offset = _align(head_len + data.nbytes)
    spans = []
    for b in buffers:
        spans.append((offset, b.nbytes))
        offset = _align(offset + b.nbytes)
    total = offset if buffers else head_len + data.nbytes
    header = bytearray(_HEAD.pack(_MAGIC, flags, len(buffers), data.nbytes))
    for off, n in spans:
        header += _SPAN.pack(off, n)
    parts = [(0, header), (head_len, data)]
    parts.extend((off, b) for (off, _), b in zip(spans, buffers))
    return total, parts


def builtin_bytes(value, flags=FLAG_VALUE):
    """to_bytes() of a value _builtin() accepts: no buffers and no refs, so the
    blob is the header and the pickle."""
    data = pickle.dumps(value, protocol=5)
    return _HEAD.pack(_MAGIC, flags, 0, len(data)) + data


def to_bytes(value, flags=FLAG_VALUE, on_ref=None):
    """serialize() into one bytes-like object (arguments and results travel as
    bytes)."""
    if _builtin(value, 0):
        return builtin_bytes(value, flags)
    return layout_bytes(value, flags, on_ref)


def layout_bytes(value, flags=FLAG_VALUE, on_ref=None):
    """to_bytes() of a value _builtin() does not accept."""
    total, parts = layout(value, flags, on_ref)
    out = bytearray(total)
    for off, part in parts:
        mv = memoryview(part).cast("B")
        out[off:off + mv.nbytes] = mv
    return out


def loads(blob, on_ref=None, copy_buffers=False):
    """Reads a blob: returns (flags, value). Out-of-band buffers are views of
    `blob` (read-only when it is), or copies with copy_buffers (for memory that
    is only valid during a call)."""
    mv = memoryview(blob)
    if mv.ndim != 1 or mv.itemsize != 1:
        mv = mv.cast("B")
    if mv.nbytes < _HEAD.size:
        raise ValueError(f"not a rayx Python value ({mv.nbytes} bytes)")
    magic, flags, count, data_len = _HEAD.unpack_from(mv, 0)
    if magic != _MAGIC:
        raise TypeError(
            "the object was not made by Python (rayx C++ values are msgpack): "
            "read it with rayx.get from C++ or pass it through rayx.cross_language")
    buffers = []
    pos = _HEAD.size
    for _ in range(count):
        off, n = _SPAN.unpack_from(mv, pos)
        pos += _SPAN.size
        view = mv[off:off + n]
        buffers.append(bytearray(view) if copy_buffers else view)
    data = mv[pos:pos + data_len]
    if on_ref is None:
        return flags, pickle.loads(data, buffers=buffers)
    unpickler = pickle.Unpickler(io.BytesIO(data), buffers=buffers)
    unpickler.persistent_load = on_ref
    return flags, unpickler.load()
