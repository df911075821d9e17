"""Ray's ray.job_config.JobConfig: accepted for the programs that build one.
rayx.init reads runtime_env and namespace from it (ray_namespace); the other
fields have no meaning here."""


class JobConfig:
    def __init__(self, jvm_options=None, code_search_path=None, runtime_env=None,
                 client_job=False, metadata=None, ray_namespace=None,
                 default_actor_lifetime="non_detached", _py_driver_sys_path=None):
        del jvm_options, code_search_path, client_job, _py_driver_sys_path
        self.runtime_env = runtime_env
        self.metadata = metadata or {}
        self.ray_namespace = ray_namespace
        self.default_actor_lifetime = default_actor_lifetime

    def set_runtime_env(self, runtime_env, validate=False):
        del validate
        self.runtime_env = runtime_env

    def set_ray_namespace(self, ray_namespace):
        self.ray_namespace = ray_namespace

    def set_metadata(self, key, value):
        self.metadata[key] = value


__all__ = ["JobConfig"]
