"""The names Ray programs import from ray._raylet (Ray's Cython core): the
public classes that live there in Ray. Nothing else of Ray's internals."""

from rayx._api import ObjectRef, ObjectRefGenerator

StreamingObjectRefGenerator = ObjectRefGenerator  # Ray's older name

__all__ = ["ObjectRef", "ObjectRefGenerator", "StreamingObjectRefGenerator"]
