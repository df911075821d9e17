"""Ray's ray.runtime_env: RuntimeEnv and RuntimeEnvConfig, plain dicts that
rayx's runtime_env options accept (see rayx._runtime_env for what is
supported)."""


class RuntimeEnvConfig(dict):
    """Ray's setup settings (setup_timeout_seconds, eager_install): accepted;
    rayx sets an env up when a worker first runs a call, with no timeout of its own."""

    def __init__(self, setup_timeout_seconds=600, eager_install=True, log_files=None):
        super().__init__(setup_timeout_seconds=setup_timeout_seconds,
                         eager_install=eager_install)
        if log_files is not None:
            self["log_files"] = log_files


class RuntimeEnv(dict):
    """A runtime_env as a dict: RuntimeEnv(env_vars=..., working_dir=...)."""

    def __init__(self, *, py_modules=None, working_dir=None, pip=None, conda=None,
                 container=None, env_vars=None, config=None, **kwargs):
        super().__init__()
        for key, value in (("py_modules", py_modules), ("working_dir", working_dir),
                           ("pip", pip), ("conda", conda), ("container", container),
                           ("env_vars", env_vars), ("config", config)):
            if value is not None:
                self[key] = value
        self.update(kwargs)
        from rayx import _runtime_env
        _runtime_env.validate(self, "RuntimeEnv")

    def to_dict(self):
        return dict(self)


__all__ = ["RuntimeEnv", "RuntimeEnvConfig"]
