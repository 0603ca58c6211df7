{{/*
Where a component's pods run and who they are, for the pod spec of its Deployment: imagePullSecrets,
priorityClassName, nodeSelector, tolerations and affinity. Called with
  dict "root" $ "component" .Values.<component> "name" "<the pods' app.kubernetes.io/name>"
The component's own nodeSelector, tolerations and affinity, when not empty, replace the chart-wide ones. The
podAntiAffinity preset (soft | hard | none) fills affinity.podAntiAffinity when that is not given: the replicas
spread over nodes (kubernetes.io/hostname).
*/}}
{{- define "volcano-py.podPlacement" -}}
{{- $root := .root -}}
{{- $c := .component -}}
{{- with $root.Values.imagePullSecrets }}
imagePullSecrets:
{{- toYaml . | nindent 2 }}
{{- end }}
{{- with $c.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- with ($c.nodeSelector | default $root.Values.nodeSelector) }}
nodeSelector:
{{- toYaml . | nindent 2 }}
{{- end }}
{{- with ($c.tolerations | default $root.Values.tolerations) }}
tolerations:
{{- toYaml . | nindent 2 }}
{{- end }}
{{- $affinity := deepCopy ($c.affinity | default $root.Values.affinity | default dict) }}
{{- if and (not (hasKey $affinity "podAntiAffinity")) (ne $c.podAntiAffinity "none") }}
{{- $term := dict "labelSelector" (dict "matchLabels" (dict "app.kubernetes.io/name" .name)) "topologyKey" "kubernetes.io/hostname" }}
{{- if eq $c.podAntiAffinity "hard" }}
{{- $_ := set $affinity "podAntiAffinity" (dict "requiredDuringSchedulingIgnoredDuringExecution" (list $term)) }}
{{- else }}
{{- $_ := set $affinity "podAntiAffinity" (dict "preferredDuringSchedulingIgnoredDuringExecution" (list (dict "weight" 100 "podAffinityTerm" $term))) }}
{{- end }}
{{- end }}
{{- with $affinity }}
affinity:
{{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/*
A component's PodDisruptionBudget, a document of its own (it starts with ---): only when it is enabled and the
component runs more than one replica (with one, a budget would block every drain or allow everything). Called
with the same dict as podPlacement.
*/}}
{{- define "volcano-py.podDisruptionBudget" -}}
{{- $c := .component -}}
{{- if and $c.podDisruptionBudget.enabled (gt (int $c.replicas) 1) }}
---
# Voluntary disruptions (node drains) take one replica at a time; the other holds or takes over the Lease.
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: {{ .name }}
  namespace: {{ .root.Release.Namespace }}
  labels:
    app.kubernetes.io/name: {{ .name }}
    app.kubernetes.io/part-of: volcano-py
spec:
  maxUnavailable: {{ $c.podDisruptionBudget.maxUnavailable }}
  selector:
    matchLabels:
      app.kubernetes.io/name: {{ .name }}
{{- end }}
{{- end }}

{{/*
"true" when the chart renders the Queue `default`: the cluster has none, or the one it has was made by this
release (so an upgrade keeps rendering what the install created, and Helm does not delete it). Called with
  dict "existing" (lookup "scheduling.volcano.sh/v1beta1" "Queue" "" "default") "release" .Release
`lookup` gives an empty map under `helm template` and client-side dry runs, which cannot see a cluster: those
render the Queue.
*/}}
{{- define "volcano-py.rendersDefaultQueue" -}}
{{- $annotations := (.existing.metadata | default dict).annotations | default dict -}}
{{- $owner := index $annotations "meta.helm.sh/release-name" | default "" -}}
{{- $ownerNamespace := index $annotations "meta.helm.sh/release-namespace" | default "" -}}
{{- if or (not .existing) (and (eq $owner .release.Name) (eq $ownerNamespace .release.Namespace)) -}}
true
{{- end -}}
{{- end }}

{{/*
The name of the scheduler's and the controllers' metrics port: https-metrics when metrics.secure serves it over
TLS (a mesh reads the protocol from the name: an http- port carrying TLS would be parsed as HTTP), else
http-metrics.
*/}}
{{- define "volcano-py.metricsPortName" -}}
{{- if .Values.metrics.secure }}https-metrics{{ else }}http-metrics{{ end }}
{{- end }}

{{/*
The prefix of every object's name: <prefix>-scheduler, <prefix>-controllers, <prefix>-webhook, ... and of the
pods' app.kubernetes.io/name labels (so two releases in one cluster select only their own pods).
  fullnameOverride: that;
  nameOverride: <release>-<nameOverride>, or the release name alone when it contains nameOverride (Helm's usual
    rule);
  neither: volcano-py, whatever the release is called (the names every install had before these values).
At most 40 characters, so <prefix>-scheduler-metrics is a valid Service name (63).
*/}}
{{- define "volcano-py.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" -}}
{{- else if .Values.nameOverride -}}
{{- if contains .Values.nameOverride .Release.Name -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Values.nameOverride | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- else -}}
volcano-py
{{- end -}}
{{- end }}

{{/*
A component's pod template metadata: its labels (app.kubernetes.io/name and part-of, which the selectors,
anti-affinity and PodDisruptionBudget use and which podLabels cannot replace, then the component's podLabels over
the chart-wide ones) and annotations (the component's podAnnotations over the chart-wide ones, then `extra`, the
chart's own such as a checksum). Called with
  dict "root" $ "component" .Values.<component> "name" "<the pods' app.kubernetes.io/name>" ["extra" dict]
*/}}
{{- define "volcano-py.podMetadata" -}}
{{- $root := .root -}}
{{- $own := dict "app.kubernetes.io/name" .name "app.kubernetes.io/part-of" "volcano-py" -}}
{{- $labels := merge $own (deepCopy (.component.podLabels | default dict)) (deepCopy ($root.Values.podLabels | default dict)) -}}
{{- $annotations := merge (deepCopy (.extra | default dict)) (deepCopy (.component.podAnnotations | default dict)) (deepCopy ($root.Values.podAnnotations | default dict)) -}}
labels:
{{- toYaml $labels | nindent 2 }}
{{- with $annotations }}
annotations:
{{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/*
A component's pod securityContext and its container's: the chart-wide podSecurityContext and
containerSecurityContext (values.yaml holds the defaults: non-root uid 65532, RuntimeDefault seccomp, no privilege
escalation, a read-only root filesystem, no capabilities) with the component's own merged over them, key by key.
A key set to null in the values removes it (e.g. runAsUser where the platform assigns one, as OpenShift does).
Called with dict "root" $ "component" .Values.<component>.
*/}}
{{- define "volcano-py.podSecurityContext" -}}
{{- toYaml (mergeOverwrite (deepCopy (.root.Values.podSecurityContext | default dict)) (deepCopy (.component.podSecurityContext | default dict))) }}
{{- end }}

{{- define "volcano-py.containerSecurityContext" -}}
{{- toYaml (mergeOverwrite (deepCopy (.root.Values.containerSecurityContext | default dict)) (deepCopy (.component.containerSecurityContext | default dict))) }}
{{- end }}

{{/*
The arguments every component takes from its values, after the chart's own: --log-level and --kube-api-qps /
--kube-api-burst when set (null leaves the component's default: info, and no client-side rate limit), then
extraArgs as given (a flag the chart also sets, given again there, wins: the last one counts). Called with the
component's values; renders list items.
*/}}
{{- define "volcano-py.componentArgs" -}}
{{- if not (kindIs "invalid" .logLevel) }}
- --log-level={{ .logLevel }}
{{- end }}
{{- if not (kindIs "invalid" .kubeApiQps) }}
- --kube-api-qps={{ .kubeApiQps }}
{{- end }}
{{- if not (kindIs "invalid" .kubeApiBurst) }}
- --kube-api-burst={{ .kubeApiBurst }}
{{- end }}
{{- range .extraArgs }}
- {{ . | quote }}
{{- end }}
{{- end }}
