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
