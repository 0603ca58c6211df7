"""Volcano job plugins (`spec.plugins`: env, svc, ssh, pytorch, tensorflow, mpi) as pure transformations.
Layer: jobs.

Each plugin may change a pod as it is built (`apply_pod_plugins`) and may need objects created beside the
job (`plugin_manifests`). Plugin arguments are Volcano's Go-flag strings (`--port=23456`). A plugin never
overrides an environment variable the user set in the template.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Mapping
from typing import Any

from scheduler.jobs import keys
from scheduler.jobs.names import job_name, job_namespace, owner_references, pod_name

Manifest = dict[str, Any]
# Returns (private key in PEM, public key as an OpenSSH authorized_keys line).
Keygen = Callable[[], tuple[str, str]]

# Plugins volcano-py implements, and the ones Volcano has that are accepted but do nothing here.
IMPLEMENTED = ("env", "pytorch", "svc", "ssh", "mpi", "tensorflow")
VOLCANO_ONLY = ("hcclrank", "ray", "ringsconfigmap")

SVC_MOUNT_PATH = "/etc/volcano"
SSH_DEFAULT_PATH = "/root/.ssh"
SSH_SUBPATH = ".ssh"
SSH_FILES = ("id_rsa", "id_rsa.pub", "authorized_keys", "config")
PYTORCH_DEFAULT_PORT = 23456
TENSORFLOW_DEFAULT_PORT = 2222
TF_ROLES = ("ps", "worker", "chief", "evaluator")  # TF_CONFIG's cluster keys, in the order Volcano writes them
MPI_DEFAULT_PORT = 22
GPU = "nvidia.com/gpu"
# volcano-py's rendezvous port for svc-only jobs: the same default as Volcano's pytorch plugin.
RENDEZVOUS_DEFAULT_PORT = PYTORCH_DEFAULT_PORT


# ---------------------------------------------------------------------------------------------- arguments


def parse_flags(args: list[str] | None) -> dict[str, str]:
    """`["--a=1", "--b", "--c", "2"]` -> `{"a": "1", "b": "true", "c": "2"}` (Go `flag` spelling)."""
    out: dict[str, str] = {}
    items = list(args or [])
    i = 0
    while i < len(items):
        name = items[i].lstrip("-")
        if "=" in name:
            key, value = name.split("=", 1)
        elif i + 1 < len(items) and not items[i + 1].startswith("-"):
            key, value = name, items[i + 1]
            i += 1
        else:
            key, value = name, "true"
        out[key] = value
        i += 1
    return out


def _flag_bool(flags: Mapping[str, str], name: str, default: bool) -> bool:
    if name not in flags:
        return default
    return flags[name].lower() in ("true", "1", "t")


def _plugins(job: Mapping[str, Any]) -> dict[str, list[str]]:
    """The job's plugins; `mpi` brings `svc` (hosts) and `ssh` (keys) with it, as in Volcano."""
    plugins = dict(job["spec"].get("plugins") or {})
    if "mpi" in plugins:
        plugins.setdefault("svc", [])
        plugins.setdefault("ssh", [])
    return plugins


def uses_svc(job: Mapping[str, Any]) -> bool:
    return "svc" in _plugins(job)


# ---------------------------------------------------------------------------------------------- helpers


def _containers(pod: Manifest) -> list[Manifest]:
    spec = pod["spec"]
    return list(spec.get("containers") or []) + list(spec.get("initContainers") or [])


def _add_env(container: Manifest, name: str, value: str | None = None, value_from: Manifest | None = None) -> None:
    """Add an env var unless the container already defines one by that name."""
    env = container.setdefault("env", [])
    if any(e.get("name") == name for e in env):
        return
    entry: Manifest = {"name": name}
    if value_from is not None:
        entry["valueFrom"] = value_from
    else:
        entry["value"] = value
    env.append(entry)


def _tasks(job: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return list(job["spec"].get("tasks") or [])


def _replicas(task: Mapping[str, Any]) -> int:
    return int(task.get("replicas", keys.DEFAULT_TASK_REPLICAS))


def total_replicas(job: Mapping[str, Any]) -> int:
    return sum(_replicas(t) for t in _tasks(job))


def global_rank(job: Mapping[str, Any], task_index: int, replica_index: int) -> int:
    """0..N-1 across all pods: tasks in spec order, then replica index."""
    return sum(_replicas(t) for t in _tasks(job)[:task_index]) + replica_index


def host_short_name(job: Mapping[str, Any], task: Mapping[str, Any], replica_index: int) -> str:
    """`hostname.subdomain` of a replica, as Volcano's svc and pytorch plugins write it."""
    pod_spec = task.get("template", {}).get("spec", {})
    hostname = pod_spec.get("hostname") or pod_name(job, task["name"], replica_index)
    subdomain = pod_spec.get("subdomain") or job_name(job)
    return f"{hostname}.{subdomain}"


def host_fqdn(job: Mapping[str, Any], task: Mapping[str, Any], replica_index: int) -> str:
    """`<hostname>.<subdomain>.<namespace>.svc`: resolvable from any namespace, whatever the cluster domain."""
    return f"{host_short_name(job, task, replica_index)}.{job_namespace(job)}.svc"


def _env_key(task_name: str) -> str:
    return task_name.replace("-", "_")


# ---------------------------------------------------------------------------------------------- pods


def apply_pod_plugins(pod: Manifest, job: Mapping[str, Any], task_index: int, replica_index: int) -> None:
    """Apply the job's plugins to a freshly built pod (owned by the caller, so changed in place)."""
    plugins = _plugins(job)
    task = _tasks(job)[task_index]
    if "env" in plugins:
        _env_on_pod(pod, replica_index)
    if "pytorch" in plugins:  # before svc: its MASTER_ADDR/RANK win over svc's rendezvous defaults
        _pytorch_on_pod(pod, job, task, replica_index, parse_flags(plugins["pytorch"]))
    if "tensorflow" in plugins:
        _tensorflow_on_pod(pod, job, task, replica_index, parse_flags(plugins["tensorflow"]))
    if "svc" in plugins:
        _svc_on_pod(pod, job, task_index, replica_index, parse_flags(plugins["svc"]))
    if "ssh" in plugins:
        _ssh_on_pod(pod, job, parse_flags(plugins["ssh"]))
    if "mpi" in plugins:
        _mpi_on_pod(pod, job, task, parse_flags(plugins["mpi"]))


def _env_on_pod(pod: Manifest, replica_index: int) -> None:
    for container in _containers(pod):
        _add_env(container, "VK_TASK_INDEX", str(replica_index))
        _add_env(container, "VC_TASK_INDEX", str(replica_index))


def _svc_on_pod(pod: Manifest, job: Mapping[str, Any], task_index: int, replica_index: int,
                flags: Mapping[str, str]) -> None:
    spec = pod["spec"]
    # `--inject-hosts-env=false`: no VC_<TASK>_HOSTS / _NUM variables (a job of many tasks could exceed the
    # environment's size); the hosts are still in the mounted ConfigMap (plugins/svc/svc.go, injectHostsEnv).
    inject_hosts = _flag_bool(flags, "inject-hosts-env", True)
    spec.setdefault("hostname", pod["metadata"]["name"])
    spec.setdefault("subdomain", job_name(job))
    cm_name = svc_configmap_name(job)
    first_task = _tasks(job)[0]
    rendezvous = {
        "MASTER_ADDR": host_fqdn(job, first_task, 0),
        "MASTER_PORT": str(RENDEZVOUS_DEFAULT_PORT),
        "WORLD_SIZE": str(total_replicas(job)),
        "RANK": str(global_rank(job, task_index, replica_index)),
    }
    for container in _containers(pod):
        for task in _tasks(job) if inject_hosts else ():
            for name in (f"VC_{_env_key(task['name']).upper()}_HOSTS", f"VC_{_env_key(task['name']).upper()}_NUM"):
                _add_env(container, name, value_from={"configMapKeyRef": {"name": cm_name, "key": name}})
        for name, value in rendezvous.items():
            _add_env(container, name, value)
        container.setdefault("volumeMounts", []).append({"name": cm_name, "mountPath": SVC_MOUNT_PATH})
    spec.setdefault("volumes", []).append({"name": cm_name, "configMap": {"name": cm_name}})


def _pytorch_on_pod(
    pod: Manifest, job: Mapping[str, Any], task: Mapping[str, Any], replica_index: int, flags: Mapping[str, str]
) -> None:
    master, worker = flags.get("master", "master"), flags.get("worker", "worker")
    port = int(flags.get("port", PYTORCH_DEFAULT_PORT))
    master_task = next((t for t in _tasks(job) if t["name"] == master), None)
    if master_task is None:
        return  # Volcano logs and leaves the pod alone
    rank = {master: "0", worker: str(replica_index + 1)}.get(task["name"])
    for container in pod["spec"].get("containers") or []:
        if not any(p.get("containerPort") == port for p in container.get("ports") or []):
            container.setdefault("ports", []).append({"name": "pytorchjob-port", "containerPort": port})
        _add_env(container, "MASTER_ADDR", host_short_name(job, master_task, 0))
        _add_env(container, "MASTER_PORT", str(port))
        _add_env(container, "WORLD_SIZE", str(total_replicas(job)))
        if rank is not None:
            _add_env(container, "RANK", rank)


def _tensorflow_on_pod(
    pod: Manifest, job: Mapping[str, Any], task: Mapping[str, Any], replica_index: int, flags: Mapping[str, str]
) -> None:
    """TF_CONFIG for distributed TensorFlow: every role's `host:port` list and this pod's role and index.

    Roles are found by task name (`--ps`, `--worker`, `--chief`, `--evaluator`; by default the role names); a
    task with another name keeps its name as its type and is not in the cluster map, as in Volcano. Hosts are
    the svc plugin's names (`<job>-<task>-<index>.<job>`), so the job should list `svc` too. A job of one pod
    is stand-alone and gets none.
    """
    tasks = _tasks(job)
    if len(tasks) == 1 and _replicas(tasks[0]) == 1:
        return
    port = int(flags.get("port", TENSORFLOW_DEFAULT_PORT))
    task_of_role = {role: flags.get(role, role) for role in TF_ROLES}
    cluster: dict[str, list[str]] = {}
    for role in TF_ROLES:
        named = next((t for t in tasks if t["name"] == task_of_role[role]), None)
        if named is not None and _replicas(named):
            cluster[role] = [f"{host_short_name(job, named, i)}:{port}" for i in range(_replicas(named))]
    kind = next((role for role, name in task_of_role.items() if name == task["name"]), task["name"])
    config = json.dumps({"cluster": cluster, "task": {"type": kind, "index": replica_index}}, separators=(",", ":"))
    for container in _containers(pod):
        _add_env(container, "TF_CONFIG", config)


def _ssh_on_pod(pod: Manifest, job: Mapping[str, Any], flags: Mapping[str, str]) -> None:
    name = ssh_secret_name(job)
    items = [{"key": f, "path": f"{SSH_SUBPATH}/{f}"} for f in SSH_FILES]
    pod["spec"].setdefault("volumes", []).append(
        {"name": name, "secret": {"secretName": name, "items": items, "defaultMode": 0o600}}
    )
    mount = {"name": name, "mountPath": flags.get("ssh-key-file-path", SSH_DEFAULT_PATH), "subPath": SSH_SUBPATH}
    for container in _containers(pod):
        container.setdefault("volumeMounts", []).append(dict(mount))


def _mpi_on_pod(pod: Manifest, job: Mapping[str, Any], task: Mapping[str, Any], flags: Mapping[str, str]) -> None:
    """Every container opens the MPI (ssh) port; the master gets `MPI_HOST`, the workers' names comma-separated,
    for `mpiexec --host`. The hostfile for `mpirun --hostfile` / `horovodrun --hostfile` is in the svc ConfigMap."""
    master, worker = mpi_roles(flags)
    port = int(flags.get("port", MPI_DEFAULT_PORT))
    for container in pod["spec"].get("containers") or []:
        if not any(p.get("containerPort") == port for p in container.get("ports") or []):
            container.setdefault("ports", []).append({"name": "mpijob-port", "containerPort": port})
    worker_task = next((t for t in _tasks(job) if t["name"] == worker), None)
    if task["name"] != master or worker_task is None:
        return
    hosts = ",".join(host_short_name(job, worker_task, i) for i in range(_replicas(worker_task)))
    for container in _containers(pod):
        _add_env(container, "MPI_HOST", hosts)


def mpi_roles(flags: Mapping[str, str]) -> tuple[str, str]:
    return flags.get("master", "master"), flags.get("worker", "worker")


def mpi_slots(task: Mapping[str, Any], flags: Mapping[str, str]) -> int:
    """Slots per worker in the hostfile: `--slots`, else the worker's GPUs (limits), else 1."""
    if "slots" in flags:
        return max(1, int(flags["slots"]))
    gpus = 0
    for container in task.get("template", {}).get("spec", {}).get("containers") or []:
        resources = container.get("resources") or {}
        value = (resources.get("limits") or {}).get(GPU) or (resources.get("requests") or {}).get(GPU) or 0
        gpus += int(str(value)) if str(value).isdigit() else 0
    return max(1, gpus)


# ---------------------------------------------------------------------------------------------- objects


def svc_configmap_name(job: Mapping[str, Any]) -> str:
    return f"{job_name(job)}-svc"


def ssh_secret_name(job: Mapping[str, Any]) -> str:
    return f"{job_name(job)}-ssh"


def plugin_manifests(job: Mapping[str, Any], keygen: Keygen | None = None) -> list[Manifest]:
    """Objects the job's plugins create (Service, ConfigMap, NetworkPolicy, Secret), in creation order."""
    plugins = _plugins(job)
    out: list[Manifest] = []
    if "svc" in plugins:
        flags = parse_flags(plugins["svc"])
        out += [svc_configmap(job), headless_service(job, flags)]
        if not _flag_bool(flags, "disable-network-policy", False):
            out.append(network_policy(job))
    if "ssh" in plugins:
        out.append(ssh_secret(job, parse_flags(plugins["ssh"]), keygen))
    return out


def _meta(job: Mapping[str, Any], name: str) -> Manifest:
    meta: Manifest = {"name": name, "namespace": job_namespace(job)}
    refs = owner_references(job)
    if refs:
        meta["ownerReferences"] = refs
    return meta


def _job_selector(job: Mapping[str, Any]) -> dict[str, str]:
    return {keys.JOB_NAME: job_name(job), keys.JOB_NAMESPACE: job_namespace(job)}


def svc_hosts(job: Mapping[str, Any]) -> dict[str, str]:
    """The svc ConfigMap data: `<task>.host` (one host per line), `VC_<TASK>_HOSTS`, `VC_<TASK>_NUM`."""
    data: dict[str, str] = {}
    for task in _tasks(job):
        fixed_hostname = bool(task.get("template", {}).get("spec", {}).get("hostname"))
        count = 1 if fixed_hostname else _replicas(task)  # a fixed hostname is one DNS name for all
        hosts = [host_short_name(job, task, i) for i in range(count)]
        key = _env_key(task["name"])
        data[f"{key}.host"] = "\n".join(hosts)
        data[f"VC_{key.upper()}_HOSTS"] = ",".join(hosts)
        data[f"VC_{key.upper()}_NUM"] = str(len(hosts))
    plugins = _plugins(job)
    if "mpi" in plugins:  # `<host> slots=<n>` lines: the hostfile format of Open MPI, MPICH and Horovod
        flags = parse_flags(plugins["mpi"])
        worker = next((t for t in _tasks(job) if t["name"] == mpi_roles(flags)[1]), None)
        if worker is not None:
            slots = mpi_slots(worker, flags)
            data["hostfile"] = "".join(f"{host_short_name(job, worker, i)} slots={slots}\n"
                                       for i in range(_replicas(worker)))
    return data


def svc_configmap(job: Mapping[str, Any]) -> Manifest:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": _meta(job, svc_configmap_name(job)),
            "data": svc_hosts(job)}


def headless_service(job: Mapping[str, Any], flags: Mapping[str, str] | None = None) -> Manifest:
    """The job's headless Service. volcano-py publishes not-ready addresses by default (Volcano: off), so a
    rendezvous name resolves while the pods are still starting; `--publish-not-ready-addresses=false` opts out."""
    publish = _flag_bool(flags or {}, "publish-not-ready-addresses", True)
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _meta(job, job_name(job)),
        "spec": {
            "clusterIP": "None",
            "selector": _job_selector(job),
            "publishNotReadyAddresses": publish,
            "ports": [{"name": "placeholder-volcano", "port": 1, "protocol": "TCP", "targetPort": 1}],
        },
    }


def network_policy(job: Mapping[str, Any]) -> Manifest:
    """Only the job's own pods may reach them (Volcano's svc default; `--disable-network-policy` drops it)."""
    selector = {"matchLabels": _job_selector(job)}
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": _meta(job, job_name(job)),
        "spec": {"podSelector": selector, "ingress": [{"from": [{"podSelector": selector}]}],
                 "policyTypes": ["Ingress"]},
    }


def ssh_config(job: Mapping[str, Any]) -> str:
    lines = ["StrictHostKeyChecking no", "UserKnownHostsFile /dev/null"]
    for task in _tasks(job):
        fixed_hostname = bool(task.get("template", {}).get("spec", {}).get("hostname"))
        for i in range(1 if fixed_hostname else _replicas(task)):
            short = host_short_name(job, task, i)
            lines += [f"Host {short.split('.')[0]}", f"  HostName {short}"]
    return "\n".join(lines) + "\n"


def ssh_secret(
    job: Mapping[str, Any], flags: Mapping[str, str] | None = None, keygen: Keygen | None = None
) -> Manifest:
    flags = flags or {}
    if flags.get("ssh-private-key"):
        private, public = flags["ssh-private-key"], flags.get("ssh-public-key", "")
    else:
        private, public = (keygen or default_keygen)()
    files = {"id_rsa": private, "id_rsa.pub": public, "authorized_keys": public, "config": ssh_config(job)}
    data = {k: base64.b64encode(v.encode()).decode() for k, v in files.items()}
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque", "metadata": _meta(job, ssh_secret_name(job)),
            "data": data}


def default_keygen() -> tuple[str, str]:
    """A fresh 2048-bit RSA pair via `cryptography`; pass `keygen=` where that package is missing."""
    try:
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import rsa
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise RuntimeError("the ssh plugin needs the `cryptography` package or a keygen callable") from exc
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    private = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL, serialization.NoEncryption()
    ).decode()
    public = key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    return private, public.decode() + "\n"
