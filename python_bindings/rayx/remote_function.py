"""Ray's ray.remote_function module: the class of @remote functions."""

from rayx._remote import RemoteFunction

__all__ = ["RemoteFunction"]
