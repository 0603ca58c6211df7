"""Layer `ctl`: `volcano-py job view`'s text, the one `vcctl job view` prints (pkg/cli/job/view.go PrintJobInfo and
PrintEvents): the same lines, labels, tabs and two-space levels, the same fields shown and left out.

vcctl reads the Job through a typed client, which clears `apiVersion` and `kind`, so those two lines are empty
there and here; quantities and times are printed as Go prints them (canonical quantities, local
`time.Time.String()`). Controlled resources are sorted (Go walks its map in random order).
"""

from __future__ import annotations

from collections.abc import Sequence

from scheduler.api.objects import MutableObj
from scheduler.cli.ctl.gofmt import canonical_quantity, go_int, go_json, go_list, go_time, since

_TEMPLATE_ANNOTATIONS = (  # the three annotations vcctl shows, under the names it gives them
    ("Cri . Cci . Io / Container - Type:          ", "cri.cci.io/container-type"),
    ("Kubernetes . Io / Availablezone:            ", "kubernetes.io/availablezone"),
    ("Network . Alpha . Kubernetes . Io / Network:", "network.alpha.kubernetes.io/network"),
)
_STATUS_COUNTS = (
    ("Succeeded:    ", "succeeded"),
    ("Pending:      ", "pending"),
    ("Running:      ", "running"),
    ("Failed:       ", "failed"),
    ("Terminating:  ", "terminating"),
    ("Unknown:      ", "unknown"),
    ("RetryCount:   ", "retryCount"),
    ("Min Available:", "minAvailable"),
    ("Version:      ", "version"),
)


class _Lines:
    def __init__(self) -> None:
        self.out: list[str] = []

    def __call__(self, level: int, text: str) -> None:
        self.out.append("  " * level + text + "\n")


def render_job(job: MutableObj, events: Sequence[MutableObj], now: float) -> str:
    line = _Lines()
    meta, spec, status = job.get("metadata") or {}, job.get("spec") or {}, job.get("status") or {}
    line(0, f"Name:       \t{meta.get('name', '')}")
    line(0, f"Namespace:  \t{meta.get('namespace', '')}")
    line(0, f"Labels:     \t{go_json(meta['labels'])}" if meta.get("labels") else "Labels:     \t<none>")
    line(0, f"Annotations:\t{go_json(meta['annotations'])}" if meta.get("annotations") else "Annotations:\t<none>")
    line(0, "API Version:\t")
    line(0, "Kind:       \t")
    line(0, "Metadata:")
    line(1, f"Creation Timestamp:\t{go_time(meta.get('creationTimestamp'))}")
    line(1, f"Generate Name:     \t{meta.get('generateName', '')}")
    line(1, f"Generation:        \t{go_int(meta.get('generation'))}")
    line(1, f"Resource Version:  \t{meta.get('resourceVersion', '')}")
    line(1, f"UID:               \t{meta.get('uid', '')}")
    line(0, "Spec:")
    line(1, f"Min Available:     \t{go_int(spec.get('minAvailable'))}")
    line(1, "Plugins:")
    plugins = spec.get("plugins") or {}
    line(2, f"Env:\t{go_list(plugins.get('env'))}")
    line(2, f"Ssh:\t{go_list(plugins.get('ssh'))}")
    line(1, f"Scheduler Name:    \t{spec.get('schedulerName', '')}")
    line(1, "Tasks:")
    for task in spec.get("tasks") or ():
        _task(line, task or {})
    _status(line, status)
    return "".join(line.out) + _events(events, now)


def _task(line: _Lines, task: MutableObj) -> None:
    template = task.get("template") or {}
    tmeta, pod = template.get("metadata") or {}, template.get("spec") or {}
    line(2, f"Name:\t{task.get('name', '')}")
    line(2, f"Replicas:\t{go_int(task.get('replicas'))}")
    line(2, "Template:")
    line(3, "Metadata:")
    line(4, "Annotations:")
    annotations = tmeta.get("annotations") or {}
    for label, key in _TEMPLATE_ANNOTATIONS:
        line(5, f"{label}\t{annotations.get(key, '')}")
    line(4, f"Creation Timestamp:\t{go_time(tmeta.get('creationTimestamp'))}")
    line(3, "Spec:")
    line(4, "Containers:")
    for container in pod.get("containers") or ():
        _container(line, container or {})
    line(4, "Image Pull Secrets:")
    for secret in pod.get("imagePullSecrets") or ():
        line(5, f"Name:     \t{(secret or {}).get('name', '')}")
    line(4, f"Restart Policy:   \t{pod.get('restartPolicy', '')}")


def _container(line: _Lines, container: MutableObj) -> None:
    line(5, "Command:")
    for word in container.get("command") or ():
        line(6, str(word))
    line(5, f"Image:\t{container.get('image', '')}")
    line(5, f"Name: \t{container.get('name', '')}")
    line(5, "Ports:")
    for port in container.get("ports") or ():
        line(6, f"Container Port:\t{go_int((port or {}).get('containerPort'))}")
        line(6, f"Name:          \t{(port or {}).get('name', '')}")
    resources = container.get("resources") or {}
    line(5, "Resources:")
    for title, kind in (("Limits:", "limits"), ("Requests:", "requests")):
        values = resources.get(kind) or {}
        line(6, title)
        line(7, f"Cpu:   \t{_quantity(values.get('cpu'))}")
        line(7, f"Memory:\t{_quantity(values.get('memory'))}")
    line(6, f"Working Dir:\t{container.get('workingDir', '')}")


def _quantity(value: object) -> str:
    """ResourceList.Cpu()/Memory(): `0` when absent, else the canonical quantity."""
    if value is None:
        return "0"
    try:
        return canonical_quantity(str(value))
    except ValueError:
        return str(value)


def _status(line: _Lines, status: MutableObj) -> None:
    line(0, "Status:")
    for label, key in _STATUS_COUNTS:
        if go_int(status.get(key)) > 0:
            line(1, f"{label}\t{go_int(status.get(key))}")
    line(1, "State:")
    line(2, f"Phase:\t{(status.get('state') or {}).get('phase', '')}")
    controlled = status.get("controlledResources") or {}
    if controlled:
        line(1, "Controlled Resources:")
        for key in sorted(controlled):
            line(2, f"{key}: \t{controlled[key]}")
    conditions = status.get("conditions") or ()
    if conditions:
        line(1, "Conditions:\n    Status\tTransitionTime")
        for condition in conditions:
            when = (condition or {}).get("lastTransitionTime")
            line(2, f"{(condition or {}).get('status', '')} \t{go_time(when) if when else '<nil>'} ")


def _events(events: Sequence[MutableObj], now: float) -> str:
    if not events:
        return "Events: \t<none>\n"
    out = [
        "Events:\n" + _event_row("Type", "Reason", "Age", "Form", "Message"),
        _event_row("-------", "-------", "-------", "-------", "-------"),
    ]
    for event in events:
        count = go_int(event.get("count"))
        age = since(event.get("firstTimestamp"), now)
        if count > 1:
            age = f"{since(event.get('lastTimestamp'), now)} (x{count} over {age})"
        source = event.get("source") or {}
        origin = ", ".join([source.get("component", ""), *([source["host"]] if source.get("host") else [])])
        out.append(
            _event_row(
                event.get("type", ""), event.get("reason", ""), age, origin, str(event.get("message", "")).strip()
            )
        )
    return "".join(out)


def _event_row(kind: object, reason: object, age: str, origin: str, message: str) -> str:
    return f"{str(kind):<15}\t{str(reason):<40}\t{age:<30}\t{origin:<40}\t{message}\n"
