"""The command lines of `volcano-py scheduler`, `controllers` and `webhook`, in Go's flag syntax. Layer: flags
(below `cli`, which alone uses it).

A platform team swaps Volcano's image for volcano-py's and keeps the Deployment's `args`, so each command takes
every flag of Volcano's vc-scheduler, vc-controller-manager and vc-webhook-manager (their
`cmd/*/app/options/options.go`, the leader-election flags of component-base, klog's logging flags,
`--feature-gates`) besides volcano-py's own. A flag is either honoured (it sets an option) or accepted with one
warning that names it and says why it has no effect. A flag nobody has is an error naming it and the closest
known one.

`syntax.py` parses (pflag's rules), `components.py` declares each component's flags, `options.py` turns the
parsed values into each component's frozen options.
"""

from __future__ import annotations

from scheduler.flags.components import CONTROLLERS, DEFAULT_ENABLED_ADMISSION, SCHEDULER, WEBHOOK
from scheduler.flags.options import (
    CommonOptions,
    ControllerOptions,
    SchedulerOptions,
    WebhookOptions,
    parse_controllers,
    parse_scheduler,
    parse_webhook,
)
from scheduler.flags.syntax import Flag, FlagError, FlagSet, HelpRequested, Ignored, Kind, Parsed

__all__ = [
    "CONTROLLERS", "DEFAULT_ENABLED_ADMISSION", "SCHEDULER", "WEBHOOK", "CommonOptions", "ControllerOptions",
    "Flag", "FlagError", "FlagSet", "HelpRequested", "Ignored", "Kind", "Parsed", "SchedulerOptions",
    "WebhookOptions", "parse_controllers", "parse_scheduler", "parse_webhook",
]
