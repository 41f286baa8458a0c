{{/* The prefix of every object's name: "referable" for a release named referable. */}}
{{- define "referable.name" -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- end -}}

{{/* The controller's name: Deployment, ServiceAccount, ClusterRole (deploy/: referable-controller). */}}
{{- define "referable.controller" -}}
{{- printf "%s-controller" (include "referable.name" .) -}}
{{- end -}}

{{/* Labels of every object: deploy/'s, plus Helm's own. */}}
{{- define "referable.labels" -}}
app.kubernetes.io/name: {{ include "referable.controller" . }}
app.kubernetes.io/component: controller
app.kubernetes.io/part-of: referable
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* The pods' selector: never changes across upgrades. */}}
{{- define "referable.selector" -}}
app.kubernetes.io/name: {{ include "referable.controller" . }}
app.kubernetes.io/component: controller
{{- end -}}

{{/* The webhook Service's name (deploy/: referable-webhook). */}}
{{- define "referable.webhook" -}}
{{- printf "%s-webhook" (include "referable.name" .) -}}
{{- end -}}
