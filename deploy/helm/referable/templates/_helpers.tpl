{{/*
The prefix of every object's name: the release's name ("referable" for a release named
referable), `<release>-<nameOverride>` with nameOverride, or fullnameOverride as it is.
*/}}
{{- define "referable.name" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" -}}
{{- else if .Values.nameOverride -}}
{{- printf "%s-%s" .Release.Name .Values.nameOverride | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* The controller's name: Deployment, ClusterRole, ... (deploy/: referable-controller). */}}
{{- define "referable.controller" -}}
{{- printf "%s-controller" (include "referable.name" .) -}}
{{- end -}}

{{/* The ServiceAccount the pods run as: the chart's, or serviceAccount.name. */}}
{{- define "referable.serviceAccount" -}}
{{- if .Values.serviceAccount.name -}}
{{- .Values.serviceAccount.name -}}
{{- else if .Values.serviceAccount.create -}}
{{- include "referable.controller" . -}}
{{- else -}}
{{- fail "serviceAccount.create=false needs serviceAccount.name: the ServiceAccount (in the release's namespace) the pods run as and the chart's RBAC binds" -}}
{{- end -}}
{{- end -}}

{{/*
The app's name, app.kubernetes.io/name: referable-controller, as deploy/ names it, whatever
the release is called (the release is app.kubernetes.io/instance).
*/}}
{{- define "referable.appName" -}}
referable-controller
{{- end -}}

{{/*
Labels of every object: deploy/'s, Helm's own, and commonLabels, one key each (the chart's
own win over a commonLabels entry of the same key).
*/}}
{{- define "referable.labels" -}}
{{- $own := dict
  "app.kubernetes.io/name" (include "referable.appName" .)
  "app.kubernetes.io/component" "controller"
  "app.kubernetes.io/part-of" "referable"
  "app.kubernetes.io/instance" .Release.Name
  "app.kubernetes.io/managed-by" .Release.Service
  "app.kubernetes.io/version" (.Chart.AppVersion | toString)
  "helm.sh/chart" (printf "%s-%s" .Chart.Name .Chart.Version) -}}
{{- toYaml (merge $own (.Values.commonLabels | default dict)) -}}
{{- end -}}

{{/* The pods' selector: never changes across upgrades. */}}
{{- define "referable.selector" -}}
app.kubernetes.io/name: {{ include "referable.appName" . }}
app.kubernetes.io/component: controller
{{- end -}}

{{/*
The pods' pull secrets: global.imagePullSecrets (an umbrella chart's) then imagePullSecrets,
each name once, as a YAML list.
*/}}
{{- define "referable.imagePullSecrets" -}}
{{- $all := concat (dig "imagePullSecrets" list (.Values.global | default dict)) (.Values.imagePullSecrets | default list) -}}
{{- $seen := dict -}}
{{- $out := list -}}
{{- range $all -}}
{{- if not (hasKey $seen .name) -}}
{{- $_ := set $seen .name true -}}
{{- $out = append $out (dict "name" .name) -}}
{{- end -}}
{{- end -}}
{{- toYaml $out -}}
{{- end -}}

{{/* The webhook Service's name (deploy/: referable-webhook). */}}
{{- define "referable.webhook" -}}
{{- printf "%s-webhook" (include "referable.name" .) -}}
{{- end -}}

{{/* The ValidatingWebhookConfiguration's name (deploy/: referable-validating-webhook). */}}
{{- define "referable.webhookConfiguration" -}}
{{- printf "%s-validating-webhook" (include "referable.name" .) -}}
{{- end -}}

{{/* The Secret where the controller keeps the webhook's CA and certificate (without cert-manager). */}}
{{- define "referable.webhookCertSecret" -}}
{{- printf "%s-cert" (include "referable.webhook" .) -}}
{{- end -}}

{{/* The Secret the ServiceMonitor's bearer token comes from. */}}
{{- define "referable.scrapeTokenSecret" -}}
{{- .Values.serviceMonitor.authorization.secretName | default (printf "%s-metrics-scraper-token" (include "referable.name" .)) -}}
{{- end -}}

{{/* The container image: repository@digest with image.digest, else repository:tag. */}}
{{- define "referable.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) -}}
{{- end -}}
{{- end -}}

{{/*
A Kubernetes memory quantity ("512Mi", "1Gi", "536870912", "500M") in MiB, as a float; empty
for an empty quantity.
*/}}
{{- define "referable.mebibytes" -}}
{{- $q := toString . -}}
{{- if $q -}}
{{- $num := regexFind "^[0-9]+(\\.[0-9]+)?" $q -}}
{{- if not $num -}}
{{- fail (printf "resources.limits.memory %q is not a memory quantity (e.g. 512Mi)" $q) -}}
{{- end -}}
{{- $unit := trimPrefix $num $q -}}
{{- $factors := dict "" 1.0 "Ki" 1024.0 "Mi" 1048576.0 "Gi" 1073741824.0 "Ti" 1099511627776.0 "k" 1000.0 "M" 1000000.0 "G" 1000000000.0 "T" 1000000000000.0 -}}
{{- if not (hasKey $factors $unit) -}}
{{- fail (printf "resources.limits.memory %q has a unit the chart does not know (use Ki, Mi, Gi, Ti, k, M, G or T)" $q) -}}
{{- end -}}
{{- divf (mulf (float64 $num) (get $factors $unit)) 1048576.0 -}}
{{- end -}}
{{- end -}}

{{/*
Contradictions in the values, refused with the fix (helm template, install and upgrade all stop
here): each would render, install, and then fail in a way that is hard to trace back.
*/}}
{{- define "referable.guards" -}}
{{- $replicas := int .Values.replicaCount -}}
{{- $maxUnavailable := toString .Values.podDisruptionBudget.maxUnavailable -}}
{{- if and .Values.podDisruptionBudget.enabled (has $maxUnavailable (list "0" "0%")) -}}
{{- fail (printf "podDisruptionBudget.maxUnavailable=%s lets no pod be evicted, so every node drain blocks: set 1 (or a percentage above 0), or leave it empty for minAvailable" $maxUnavailable) -}}
{{- end -}}
{{- $byMin := and .Values.podDisruptionBudget.enabled (eq $maxUnavailable "") -}}
{{- if and $byMin (kindIs "string" .Values.podDisruptionBudget.minAvailable) (eq .Values.podDisruptionBudget.minAvailable "100%") -}}
{{- fail "podDisruptionBudget.minAvailable=100% lets no pod be evicted, so every node drain blocks: set a lower minAvailable (1 with two replicas), or podDisruptionBudget.enabled=false" -}}
{{- end -}}
{{- if and $byMin (not .Values.sharding.shards) (not (kindIs "string" .Values.podDisruptionBudget.minAvailable)) (ge (int .Values.podDisruptionBudget.minAvailable) $replicas) -}}
{{- fail (printf "podDisruptionBudget.minAvailable=%v with replicaCount=%d lets no pod be evicted, so every node drain blocks: set replicaCount=%d or more, or a lower minAvailable, or podDisruptionBudget.enabled=false" .Values.podDisruptionBudget.minAvailable $replicas (add (int .Values.podDisruptionBudget.minAvailable) 1)) -}}
{{- end -}}
{{- $shards := int .Values.sharding.shards -}}
{{- if and (gt $shards 0) (not .Values.leaderElection.enabled) -}}
{{- fail (printf "sharding.shards=%d needs leaderElection.enabled=true: its id and timings are the buckets' Leases'" $shards) -}}
{{- end -}}
{{- if and (gt $shards 0) (lt $shards $replicas) -}}
{{- fail (printf "sharding.shards=%d with replicaCount=%d leaves a replica with no bucket to serve: set sharding.shards=%d or more" $shards $replicas $replicas) -}}
{{- end -}}
{{- if and (not .Values.leaderElection.enabled) (gt $replicas 1) -}}
{{- fail (printf "leaderElection.enabled=false with replicaCount=%d makes %d controllers write the same statuses and exports: set leaderElection.enabled=true, or replicaCount=1" $replicas $replicas) -}}
{{- end -}}
{{- $limit := "" -}}
{{- with .Values.resources -}}{{- with .limits -}}{{- $limit = .memory | default "" -}}{{- end -}}{{- end -}}
{{- if and .Values.heapCapMiB $limit -}}
{{- $limitMiB := include "referable.mebibytes" $limit | float64 -}}
{{- if ge (float64 .Values.heapCapMiB) $limitMiB -}}
{{- fail (printf "heapCapMiB=%v is at or above resources.limits.memory=%v (%.0f MiB): the container is killed for memory before V8 collects garbage; set heapCapMiB to about half the limit (BENCHMARKS.md, Sizing), or raise resources.limits.memory" .Values.heapCapMiB $limit $limitMiB) -}}
{{- end -}}
{{- end -}}
{{- end -}}
