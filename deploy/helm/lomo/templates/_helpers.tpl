{{- define "lomo.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "lomo.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* Selector of one part: (dict "root" $ "part" "api") */}}
{{- define "lomo.selector" -}}
app.kubernetes.io/name: {{ .root.Chart.Name }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .part }}
{{- end -}}

{{- define "lomo.image" -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) -}}
{{- end -}}

{{- define "lomo.buildId" -}}
{{- .Values.worker.buildId | default .Chart.AppVersion -}}
{{- end -}}

{{- define "lomo.secretName" -}}
{{- .Values.secrets.existingSecret | default (printf "%s-secrets" (include "lomo.fullname" .)) -}}
{{- end -}}

{{/* The secrets every process reads, by reference only; the optional ones may be absent. */}}
{{- define "lomo.secretEnv" -}}
{{- $name := include "lomo.secretName" . -}}
{{- range $key := list "LOMO_ADMIN_TOKEN" "LOMO_CALLBACK_SECRET" "LOMO_SIM_TOKEN" "LOMO_DATABASE_URL" }}
- name: {{ $key }}
  valueFrom:
    secretKeyRef: {name: {{ $name }}, key: {{ $key }}}
{{- end }}
{{- range $key := list "ANTHROPIC_API_KEY" "LOMO_S3_ACCESS_KEY" "LOMO_S3_SECRET_KEY" }}
- name: {{ $key }}
  valueFrom:
    secretKeyRef: {name: {{ $name }}, key: {{ $key }}, optional: true}
{{- end }}
{{- end -}}

{{/* What a Lomo container shares: image, settings, secrets, security. (dict "root" $) */}}
{{- define "lomo.container" -}}
image: {{ include "lomo.image" .root }}
imagePullPolicy: {{ .root.Values.image.pullPolicy }}
envFrom:
  - configMapRef:
      name: {{ include "lomo.fullname" .root }}-config
env:
  {{- include "lomo.secretEnv" .root | nindent 2 }}
securityContext:
  {{- toYaml .root.Values.securityContext | nindent 2 }}
{{- end -}}

{{- define "lomo.podSpec" -}}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
securityContext:
  {{- toYaml .Values.podSecurityContext | nindent 2 }}
{{- end -}}

{{/* An HTTP probe; the Host header is one the part answers to (LOMO_ALLOWED_HOSTS). */}}
{{- define "lomo.probe" -}}
httpGet:
  path: {{ .path }}
  port: {{ .port }}
  httpHeaders:
    - {name: Host, value: localhost}
periodSeconds: {{ .period | default 10 }}
timeoutSeconds: 5
failureThreshold: {{ .failures | default 3 }}
{{- end -}}

{{- define "lomo.assetsVolume" -}}
{{- if .Values.assets.existingClaim }}
- name: assets
  persistentVolumeClaim:
    claimName: {{ .Values.assets.existingClaim }}
{{- end }}
{{- end -}}

{{- define "lomo.assetsMount" -}}
{{- if .Values.assets.existingClaim }}
- name: assets
  mountPath: /data/assets
{{- end }}
{{- end -}}

{{- define "lomo.simUrl" -}}
{{- if .Values.sim.enabled -}}
{{- printf "http://%s-sim:%v" (include "lomo.fullname" .) .Values.sim.port -}}
{{- else -}}
{{- required "generationUrl is required when the simulator is off (sim.enabled=false)" .Values.generationUrl -}}
{{- end -}}
{{- end -}}
