"""kwok stages for the conformance run: the e2e control plane's stages plus a stand-in for the container runtime.

Volcano's suites run on kind, where containers really run: a task with ``/bin/sh -c "sleep 10s && exit 3"`` fails
after ten seconds with exit code 3, and its Job's policies react. kwok runs nothing, so without help every pod
would stay Running for ever and every spec that waits for a task to finish would time out on both sides alike.

The stage below plays the script of the first container (command + args) when it is a short, self-contained
shell line: it contains ``sleep N`` (N < 600 seconds) and starts no daemon or program kwok cannot stand in for
(sshd, mpiexec, python). After N seconds the container "exits" with

* the code of an ``exit K`` in the script, else
* 127 when the command after ``&&`` is not one sh would find (``sleep 10s && xxx``), else
* 0;

and the pod then does what the kubelet does with that code under its restartPolicy: Never, or OnFailure with 0,
ends the pod (Succeeded / Failed with the container's terminated state); otherwise the container restarts
(restartCount + 1, lastState.terminated carries the code) and the script plays again. Any other pod (nginx,
``sleep 100000``, sshd) keeps running, as it would on kind.
"""

from __future__ import annotations

from controlplane import KWOK_STAGES

MAX_SLEEP_SECONDS = 600
UNEMULATED = "sshd|mpiexec|python|trap "
KNOWN_AFTER_AND = ("exit", "echo", "true", "sleep", "date")

# jq (kwok selectors and delays): the first container's script as one string.
_SCRIPT = '(.spec.containers[0] | ((.command // []) + (.args // [])) | join(" "))'
_FINITE = (
    f'{_SCRIPT} | test("(^|[^a-z])sleep [0-9]+") and (test("{UNEMULATED}") | not)'
    f' and ((capture("sleep (?<n>[0-9]+)").n | tonumber) < {MAX_SLEEP_SECONDS})'
)
_DELAY = f'{_SCRIPT} | capture("sleep (?<n>[0-9]+)").n + "s"'

_KNOWN = " ".join(f'"{w}"' for w in KNOWN_AFTER_AND)
SCRIPT_STAGE = f"""
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pod-script-exit
spec:
  resourceRef:
    apiGroup: v1
    kind: Pod
  selector:
    matchExpressions:
    - key: '.metadata.deletionTimestamp'
      operator: 'DoesNotExist'
    - key: '.status.phase'
      operator: 'In'
      values: ['Running']
    - key: '{_FINITE}'
      operator: 'In'
      values: ['true']
  delay:
    durationMilliseconds: 1000
    durationFrom:
      jq:
        expression: '{_DELAY}'
  next:
    statusTemplate: |
      {{{{ $now := Now }}}}
      {{{{ $c := index .spec.containers 0 }}}}
      {{{{ $script := join " " (concat (default (list) $c.command) (default (list) $c.args)) }}}}
      {{{{ $code := "0" }}}}
      {{{{ $after := regexReplaceAll "&& *" (regexFind "&& *[A-Za-z_]+" $script) "" }}}}
      {{{{ if and $after (not (has $after (list {_KNOWN}))) }}}}{{{{ $code = "127" }}}}{{{{ end }}}}
      {{{{ with regexFind "exit [0-9]+" $script }}}}{{{{ $code = trimPrefix "exit " . }}}}{{{{ end }}}}
      {{{{ $policy := .spec.restartPolicy }}}}
      {{{{ $ends := or (eq $policy "Never") (and (eq $policy "OnFailure") (eq $code "0")) }}}}
      {{{{ $reason := "Completed" }}}}{{{{ if ne $code "0" }}}}{{{{ $reason = "Error" }}}}{{{{ end }}}}
      {{{{ $root := . }}}}
      {{{{ if $ends }}}}
      conditions:
      - lastTransitionTime: {{{{ $now | Quote }}}}
        status: "False"
        type: Ready
        reason: PodCompleted
      - lastTransitionTime: {{{{ $now | Quote }}}}
        status: "False"
        type: ContainersReady
        reason: PodCompleted
      containerStatuses:
      {{{{ range .spec.containers }}}}
      - image: {{{{ .image | Quote }}}}
        name: {{{{ .name | Quote }}}}
        ready: false
        restartCount: 0
        started: false
        state:
          terminated:
            exitCode: {{{{ $code }}}}
            finishedAt: {{{{ $now | Quote }}}}
            reason: {{{{ $reason }}}}
            startedAt: {{{{ $now | Quote }}}}
      {{{{ end }}}}
      phase: {{{{ if eq $code "0" }}}}Succeeded{{{{ else }}}}Failed{{{{ end }}}}
      {{{{ else }}}}
      containerStatuses:
      {{{{ range $i, $item := .spec.containers }}}}
      {{{{ $restarts := 0 }}}}
      {{{{ with $root.status.containerStatuses }}}}
      {{{{ with index . $i }}}}{{{{ $restarts = .restartCount }}}}{{{{ end }}}}
      {{{{ end }}}}
      - image: {{{{ $item.image | Quote }}}}
        name: {{{{ $item.name | Quote }}}}
        ready: true
        restartCount: {{{{ add1 $restarts }}}}
        started: true
        lastState:
          terminated:
            exitCode: {{{{ $code }}}}
            finishedAt: {{{{ $now | Quote }}}}
            reason: {{{{ $reason }}}}
            startedAt: {{{{ $now | Quote }}}}
        state:
          running:
            startedAt: {{{{ $now | Quote }}}}
      {{{{ end }}}}
      phase: Running
      {{{{ end }}}}
"""

CONFORMANCE_KWOK_STAGES = KWOK_STAGES.rstrip() + "\n" + SCRIPT_STAGE
