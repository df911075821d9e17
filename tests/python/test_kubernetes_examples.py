"""The Kubernetes examples (examples/kubernetes/*.yaml) checked against the
Kubernetes API's own models (Debian's python3-kubernetes): every field of every
object exists where it is written and has the type the API gives it, the
required fields are there, and what `rayx start --from-env` needs is set (one
pod per node, RANK from the Job's completion index, WORLD_SIZE matching the
pod count, MASTER_ADDR naming pod 0, GPUs, a memory-backed /dev/shm)."""

import glob
import os

import pytest

yaml = pytest.importorskip("yaml", reason="python3-yaml is not installed")
kubernetes = pytest.importorskip(
    "kubernetes", reason="python3-kubernetes is not installed (scripts/install-deps.sh installs it)")
from kubernetes import client  # noqa: E402

EXAMPLES = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "kubernetes")
MODELS = {("v1", "Service"): "V1Service", ("batch/v1", "Job"): "V1Job"}
SCALARS = {"str": str, "int": int, "bool": bool, "float": (int, float), "object": object}


def check(value, type_name, path, errors):
    """Appends to `errors` what in `value` does not fit the API type `type_name`."""
    if type_name.startswith("list["):
        if not isinstance(value, list):
            errors.append(f"{path}: a list expected, not {type(value).__name__}")
            return
        for i, item in enumerate(value):
            check(item, type_name[5:-1], f"{path}[{i}]", errors)
    elif type_name.startswith("dict("):
        if not isinstance(value, dict):
            errors.append(f"{path}: a map expected, not {type(value).__name__}")
            return
        inner = type_name[5:-1].split(", ", 1)[1]
        for key, item in value.items():
            check(item, inner, f"{path}.{key}", errors)
    elif type_name in SCALARS:
        ok = isinstance(value, SCALARS[type_name])
        # Quantities (resources' limits and requests) are strings in the API
        # and numbers in YAML too.
        quantity = type_name == "str" and (".limits." in path or ".requests." in path)
        if not ok and not (quantity and isinstance(value, (int, float))):
            errors.append(f"{path}: {type_name} expected, not {value!r}")
    else:
        model = getattr(client, type_name)
        if not isinstance(value, dict):
            errors.append(f"{path}: a {type_name} map expected, not {value!r}")
            return
        by_json = {j: a for a, j in model.attribute_map.items()}
        for key, item in value.items():
            if key not in by_json:
                errors.append(f"{path}.{key}: no such field in {type_name}")
                continue
            check(item, model.openapi_types[by_json[key]], f"{path}.{key}", errors)


def validate(doc, type_name, path):
    errors = []
    check(doc, type_name, path, errors)
    assert not errors, "\n".join(errors)
    # The client's own checks: required fields, enum values it knows.
    client.ApiClient()._ApiClient__deserialize(doc, type_name)


def documents():
    files = sorted(glob.glob(os.path.join(EXAMPLES, "*.yaml")))
    assert files, "no Kubernetes examples found in " + EXAMPLES
    for path in files:
        with open(path) as f:
            for i, doc in enumerate(yaml.safe_load_all(f)):
                if doc:
                    yield f"{os.path.basename(path)}#{i}", doc


def env_of(container):
    return {e["name"]: e for e in container.get("env", [])}


def check_rayx_pod(template, where):
    """What `rayx start --from-env` needs from a pod template."""
    spec = template["spec"]
    (container,) = [c for c in spec["containers"] if c.get("args", [])[:2] == ["start", "--from-env"]]
    env = env_of(container)
    assert "RAYX_TOKEN" in env and "secretKeyRef" in env["RAYX_TOKEN"]["valueFrom"], where
    assert "nvidia.com/gpu" in container["resources"]["limits"], where
    shm = [m for m in container["volumeMounts"] if m["mountPath"] == "/dev/shm"]
    assert shm, f"{where}: no /dev/shm mount (the node's object store)"
    (volume,) = [v for v in spec["volumes"] if v["name"] == shm[0]["name"]]
    assert volume["emptyDir"]["medium"] == "Memory", where
    return env


@pytest.mark.parametrize("name,doc", list(documents()))
def test_every_object_fits_the_kubernetes_api(name, doc):
    kind = (doc.get("apiVersion"), doc.get("kind"))
    if kind in MODELS:
        validate(doc, MODELS[kind], name)
    elif kind == ("kubeflow.org/v1", "PyTorchJob"):
        # A custom resource: its pod templates are the API's.
        for role, replicas in doc["spec"]["pytorchReplicaSpecs"].items():
            assert isinstance(replicas["replicas"], int), name
            validate(replicas["template"], "V1PodTemplateSpec", f"{name}.{role}")
            check_rayx_pod(replicas["template"], f"{name}.{role}")
    else:
        pytest.fail(f"{name}: no model to check a {kind} against")


def test_the_indexed_job_runs_one_rayx_node_per_pod():
    docs = {d["kind"]: d for _, d in documents() if d.get("apiVersion") in ("v1", "batch/v1")}
    job, service = docs["Job"], docs["Service"]
    spec = job["spec"]
    assert spec["completionMode"] == "Indexed"
    assert spec["completions"] == spec["parallelism"]
    pod = spec["template"]
    env = check_rayx_pod(pod, "the Job")
    assert env["RANK"]["valueFrom"]["fieldRef"]["fieldPath"] == \
        "metadata.annotations['batch.kubernetes.io/job-completion-index']"
    assert int(env["WORLD_SIZE"]["value"]) == spec["completions"]
    # MASTER_ADDR is pod 0's DNS name through the headless Service.
    assert service["spec"]["clusterIP"] == "None"
    assert pod["spec"]["subdomain"] == service["metadata"]["name"]
    assert env["MASTER_ADDR"]["value"] == f"{job['metadata']['name']}-0.{service['metadata']['name']}"
    port = int(env["MASTER_PORT"]["value"])
    assert port in [p["port"] for p in service["spec"]["ports"]]
    labels = pod["metadata"]["labels"]
    assert all(labels.get(k) == v for k, v in service["spec"]["selector"].items())
    # One pod per node.
    anti = pod["spec"]["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert anti[0]["topologyKey"] == "kubernetes.io/hostname"
    args = pod["spec"]["containers"][0]["args"]
    assert args[args.index("--nnodes") + 1] == str(spec["completions"])


def test_a_misspelt_field_is_caught():
    """The check itself: a field the API does not have fails it."""
    errors = []
    check({"spec": {"template": {"spec": {"containers": [{"name": "x", "imagee": "y"}]}}}},
          "V1Job", "job", errors)
    assert errors == ["job.spec.template.spec.containers[0].imagee: no such field in V1Container"]
    errors = []
    check({"spec": {"completions": "2"}}, "V1Job", "job", errors)
    assert errors == ["job.spec.completions: int expected, not '2'"]
