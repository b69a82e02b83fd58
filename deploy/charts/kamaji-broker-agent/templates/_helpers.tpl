{{/* Names. */}}
{{- define "kba.name" -}}
{{- .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "kba.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "kba.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "kba.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "kba.selectorLabels" -}}
app.kubernetes.io/name: {{ include "kba.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "kba.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "kba.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: kamaji-broker
kamaji-broker.io/site: {{ .Values.site | quote }}
{{- end -}}

{{/* Secret and ConfigMap the pod mounts: existing ones, or the ones this chart creates. */}}
{{- define "kba.credentialsSecret" -}}
{{- if and .Values.credentials.existingSecret .Values.credentials.value -}}
{{- fail "give credentials.existingSecret or credentials.value, not both" -}}
{{- end -}}
{{- if .Values.credentials.existingSecret -}}
{{- .Values.credentials.existingSecret -}}
{{- else if .Values.credentials.value -}}
{{- printf "%s-nats" (include "kba.fullname" .) -}}
{{- else -}}
{{- fail "credentials: set credentials.existingSecret (a Secret holding the site's seed from `kamaji-broker site add`) or credentials.value" -}}
{{- end -}}
{{- end -}}

{{/* Operator mode: the Secret where the agent keeps its own NKey seed and JWT. */}}
{{- define "kba.identitySecret" -}}
{{- default (printf "%s-identity" (include "kba.fullname" .)) .Values.credentials.identitySecret -}}
{{- end -}}

{{/*
Operator mode, in the release namespace: exactly agent/rbac.py's IDENTITY_RULES, on the one
identity Secret (create cannot be limited to a name).
*/}}
{{- define "kba.identityRules" -}}
- apiGroups: [""]
  resources: ["secrets"]
  resourceNames: [{{ include "kba.identitySecret" . | quote }}]
  verbs: ["get", "update"]
- apiGroups: [""]
  resources: ["secrets"]
  verbs: ["create"]
{{- end -}}

{{/* Where the NATS CA comes from: "configMap <name>", "secret <name>", or "" (system CAs). */}}
{{- define "kba.natsCA" -}}
{{- with .Values.nats.tls -}}
{{- if .existingConfigMap -}}configMap {{ .existingConfigMap }}
{{- else if .existingSecret -}}secret {{ .existingSecret }}
{{- else if .ca -}}configMap {{ printf "%s-nats-ca" (include "kba.fullname" $) }}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "kba.hubKeysConfigMap" -}}
{{- if and .Values.hubPublicKeys.existingConfigMap .Values.hubPublicKeys.json -}}
{{- fail "give hubPublicKeys.existingConfigMap or hubPublicKeys.json, not both" -}}
{{- end -}}
{{- if .Values.hubPublicKeys.existingConfigMap -}}
{{- .Values.hubPublicKeys.existingConfigMap -}}
{{- else if .Values.hubPublicKeys.json -}}
{{- printf "%s-hub-keys" (include "kba.fullname" .) -}}
{{- else -}}
{{- fail "hubPublicKeys: set hubPublicKeys.existingConfigMap or hubPublicKeys.json (--set-file hubPublicKeys.json=keys/hub-public-keys.json)" -}}
{{- end -}}
{{- end -}}

{{/*
The agent's Kubernetes permissions: exactly agent/rbac.py (tests/deploy compares them).
A Role in each target namespace, or one ClusterRole with allNamespaces.
*/}}
{{- define "kba.rules" -}}
# TenantControlPlanes: the agent's whole job.
- apiGroups: ["kamaji.clastix.io"]
  resources: ["tenantcontrolplanes"]
  verbs: ["get", "list", "watch", "create", "patch", "delete"]
# <tcp>-admin-kubeconfig and <tcp>-ca, watched to seal back to the hub.
- apiGroups: [""]
  resources: ["secrets"]
  verbs: ["list", "watch"]
# Warning events about orphans.
- apiGroups: [""]
  resources: ["events"]
  verbs: ["create"]
{{- end -}}

{{- define "kba.checks" -}}
{{- if not .Values.site -}}
{{- fail "site is required: this site's name, as given to `kamaji-broker site add`" -}}
{{- end -}}
{{- if not .Values.nats.url -}}
{{- fail "nats.url is required: the NATS URL(s) the agent dials, e.g. tls://nats.example:4222" -}}
{{- end -}}
{{- $tls := .Values.nats.tls -}}
{{- if gt (len (compact (list $tls.existingConfigMap $tls.existingSecret $tls.ca))) 1 -}}
{{- fail "nats.tls: give one of nats.tls.existingConfigMap, nats.tls.existingSecret or nats.tls.ca, not several" -}}
{{- end -}}
{{- if not (include "kba.natsCA" .) -}}
{{- range (splitList "," .Values.nats.url) -}}
{{- if not (hasPrefix "tls://" (trim .)) -}}
{{- fail (printf "nats.tls: %s is not verified by any CA: set nats.tls.ca (--set-file nats.tls.ca=nats/tls/ca.crt), nats.tls.existingConfigMap or nats.tls.existingSecret, or use tls:// URLs of a publicly trusted server; NATS in plaintext is refused" (trim .)) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- if and .Values.allNamespaces .Values.namespaces -}}
{{- fail "give namespaces or allNamespaces: true, not both" -}}
{{- end -}}
{{- if not (or .Values.allNamespaces .Values.namespaces) -}}
{{- fail "set namespaces (the target namespaces, e.g. --set namespaces={tenants}) or allNamespaces: true" -}}
{{- end -}}
{{- end -}}
