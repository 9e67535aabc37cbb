{{/* Chart name. */}}
{{- define "berth.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Full name: RELEASE-berth, or RELEASE when it already contains the chart name. */}}
{{- define "berth.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "berth.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "berth.selectorLabels" -}}
app.kubernetes.io/name: {{ include "berth.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "berth.labels" -}}
helm.sh/chart: {{ include "berth.chart" . }}
{{ include "berth.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/component: registry
{{- end }}

{{- define "berth.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "berth.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "berth.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion (toString .Values.image.tag)) }}
{{- end }}
{{- end }}

{{/* Where mounted secret files live inside the container. */}}
{{- define "berth.secretsDir" -}}/run/secrets/berth{{- end }}

{{/* "true" when the service account carries an IRSA role. */}}
{{- define "berth.irsa" -}}
{{- if hasKey (.Values.serviceAccount.annotations | default dict) "eks.amazonaws.com/role-arn" }}true{{- end }}
{{- end }}

{{/*
"true" when nothing durable is kept in /data: PostgreSQL, S3 and the shared keys all come from outside.
This is the scaled-out shape; no PersistentVolumeClaim is made or mounted then.
*/}}
{{- define "berth.stateless" -}}
{{- if and .Values.postgresql.existingSecret .Values.s3.bucket .Values.secrets.existingSecret }}true{{- end }}
{{- end }}

{{/* "true" when /data is on a PersistentVolumeClaim. */}}
{{- define "berth.usesClaim" -}}
{{- if and .Values.persistence.enabled (not (include "berth.stateless" .)) }}true{{- end }}
{{- end }}

{{/* "true" when some secret is mounted as files under berth.secretsDir. */}}
{{- define "berth.hasSecretFiles" -}}
{{- if or .Values.secrets.existingSecret .Values.adminPassword.existingSecret .Values.postgresql.existingSecret (and .Values.s3.bucket .Values.s3.existingSecret) .Values.tls.enabled }}true{{- end }}
{{- end }}

{{- define "berth.claimName" -}}
{{- default (printf "%s-data" (include "berth.fullname" .)) .Values.persistence.existingClaim }}
{{- end }}

{{/* BLOB_STORE from s3.*: s3://BUCKET[/PREFIX]?endpoint=...&region=... */}}
{{- define "berth.blobStore" -}}
{{- $s3 := .Values.s3 -}}
{{- $url := printf "s3://%s" $s3.bucket -}}
{{- with $s3.prefix }}{{ $url = printf "%s/%s" $url (trimAll "/" .) }}{{ end -}}
{{- $query := list -}}
{{- with $s3.endpoint }}{{ $query = append $query (printf "endpoint=%s" .) }}{{ end -}}
{{- with $s3.region }}{{ $query = append $query (printf "region=%s" .) }}{{ end -}}
{{- if $query }}{{ $url = printf "%s?%s" $url (join "&" $query) }}{{ end -}}
{{- $url -}}
{{- end }}

{{/* EXTERNAL_URL: externalURL, else the first Ingress host. */}}
{{- define "berth.externalURL" -}}
{{- if .Values.externalURL }}
{{- .Values.externalURL }}
{{- else if and .Values.ingress.enabled .Values.ingress.hosts }}
{{- $host := (first .Values.ingress.hosts).host }}
{{- if $host }}
{{- $scheme := "http" }}
{{- range .Values.ingress.tls }}
{{- if has $host (.hosts | default list) }}{{ $scheme = "https" }}{{ end }}
{{- end }}
{{- printf "%s://%s" $scheme $host }}
{{- end }}
{{- end }}
{{- end }}

{{/*
Refuse values that cannot work. Several replicas share nothing unless PostgreSQL, the bucket and the keys
are given: each pod would keep its own SQLite file, blobs and keys, and pushes would land on one pod only.
*/}}
{{- define "berth.validate" -}}
{{- $replicas := int .Values.replicaCount }}
{{- if lt $replicas 0 }}
{{- fail (printf "berth: replicaCount must be 0 or more, not %d" $replicas) }}
{{- end }}
{{- $s3Creds := or .Values.s3.existingSecret (include "berth.irsa" .) .Values.s3.ambientCredentials }}
{{- if gt $replicas 1 }}
{{- $missing := list }}
{{- if not .Values.postgresql.existingSecret }}
{{- $missing = append $missing (printf "postgresql.existingSecret (a Secret whose key %q holds DATABASE_URL, postgres://...)" .Values.postgresql.key) }}
{{- end }}
{{- if not .Values.s3.bucket }}
{{- $missing = append $missing "s3.bucket (with s3.endpoint and s3.region for a non-AWS store)" }}
{{- end }}
{{- if not $s3Creds }}
{{- $missing = append $missing (printf "s3.existingSecret (a Secret with keys %q and %q), or the IRSA annotation eks.amazonaws.com/role-arn in serviceAccount.annotations, or s3.ambientCredentials=true (EKS Pod Identity, an instance profile)" .Values.s3.accessKeyIdKey .Values.s3.secretAccessKeyKey) }}
{{- end }}
{{- if not .Values.secrets.existingSecret }}
{{- $missing = append $missing (printf "secrets.existingSecret (a Secret with keys %q, %q and %q, the same for every replica)" .Values.secrets.masterKeyKey .Values.secrets.jwtSecretKey .Values.secrets.configSecretKeyKey) }}
{{- end }}
{{- if $missing }}
{{- fail (printf "\n\nberth: replicaCount=%d needs state shared by every replica (PostgreSQL, an S3 bucket and the same keys); missing:\n  - %s\nSet them, or use replicaCount=1 (SQLite and blobs on a PersistentVolumeClaim)." $replicas (join "\n  - " $missing)) }}
{{- end }}
{{- end }}
{{- if and .Values.s3.bucket (not $s3Creds) }}
{{- fail "\n\nberth: s3.bucket is set but no credentials are: set s3.existingSecret (access key id and secret access key), or annotate the service account with eks.amazonaws.com/role-arn (IRSA), or set s3.ambientCredentials=true when the pod gets credentials otherwise (EKS Pod Identity, the node instance profile)." }}
{{- end }}
{{- if and .Values.tls.enabled (not .Values.tls.existingSecret) }}
{{- fail "\n\nberth: tls.enabled needs tls.existingSecret (a kubernetes.io/tls Secret)." }}
{{- end }}
{{- end }}
