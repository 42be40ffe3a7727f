# A real Kubernetes control plane on loopback, for the chart's install test: etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler and kubectl built from the Go module proxy into the project's
# cache, plus kwok for a fake node (pods are marked running, Job pods complete; no container runs).
# The image's supply-chain tools join that one build: syft (the image's SBOM) and cosign (its signature
# and attestations, deploy/image/publish). Sourced; needs common.sh.
#
#   kube_fetch              binaries, kwok's stages and the prometheus-operator CRDs into the cache
#                           (idempotent, locked); sets KUBE_BIN_DIR. The rest sits beside it:
#                           $KUBE_BIN_DIR/../kwok-stages, $KUBE_BIN_DIR/../prometheus-operator-crds
#   kube_start STATE_DIR    PKI, the five processes and a Ready fake node; writes STATE_DIR/admin.kubeconfig
#   kube_stop STATE_DIR     stops what kube_start started in STATE_DIR

KUBE_VERSION=${KUBE_VERSION:-v1.37.2}
KUBE_ETCD_VERSION=${KUBE_ETCD_VERSION:-v3.7.3}
KUBE_KWOK_VERSION=${KUBE_KWOK_VERSION:-v0.8.0}
KUBE_PROMETHEUS_OPERATOR_VERSION=${KUBE_PROMETHEUS_OPERATOR_VERSION:-v0.85.0}
KUBE_SYFT_VERSION=${KUBE_SYFT_VERSION:-v1.57.2}
# v2, not v3: v3 signs by default with a signing config and a trusted root fetched from sigstore's TUF
# repository, into bundles attached through the OCI referrers API; v2 signs with a key and no transparency
# log without asking any server (its verify warns that sigstore's trusted root is out of reach, and needs
# none for a key), and those servers are not reachable here.
KUBE_COSIGN_VERSION=${KUBE_COSIGN_VERSION:-v2.6.5}
KUBE_NODE_NAME=kwok-node-0

# The Go the project builds its Go tools with: the machine's, never a downloaded toolchain.
kube_go() {
  local go
  go=$(command -v go || true)
  [[ -n $go ]] || go=/usr/local/go/bin/go
  [[ -x $go ]] || die "kube_fetch: Go is needed to build the Kubernetes control plane $KUBE_VERSION"
  echo "$go"
}

kube_fetch() {
  local dir=$CHARGE_OUTBOX_CACHE/kube-$KUBE_VERSION
  KUBE_BIN_DIR=$dir/bin
  kube_build_control_plane "$dir"
  kube_fetch_crds "$dir/prometheus-operator-crds"
}

# The binaries one build makes: the control plane, kwok's fake node, a real node's kubelet and
# kube-proxy (kube_node.sh), which share most of their packages with the control plane, and the image's
# syft and cosign (cosign's Kubernetes key provider shares client-go with them too).
KUBE_BINARIES=(kube-apiserver kube-controller-manager kube-scheduler kubectl etcd kwok kubelet kube-proxy syft cosign)

kube_build_complete() {
  local dir=$1 binary
  [[ -f $dir/complete ]] || return 1
  for binary in "${KUBE_BINARIES[@]}"; do [[ -x $dir/bin/$binary ]] || return 1; done
}

kube_build_control_plane() {
  local dir=$1
  kube_build_complete "$dir" && return 0
  local go
  go=$(kube_go)
  mkdir -p "$CHARGE_OUTBOX_CACHE"
  # Locked: two test runs at once would build it twice into one place. Built beside, then moved, so that a
  # killed build never leaves binaries that look usable.
  (
    flock 9
    kube_build_complete "$dir" && exit 0
    say "building the Kubernetes control plane and node $KUBE_VERSION, syft $KUBE_SYFT_VERSION and cosign $KUBE_COSIGN_VERSION from the Go module proxy (once: 6 minutes for the control plane alone on an idle machine; 27 measured with syft and cosign on a loaded one)"
    local build_started=$SECONDS
    local work
    work=$(mktemp -d "$CHARGE_OUTBOX_CACHE/kube-build.XXXXXX")
    # The Go caches (several GB) live and die with the build; the module cache is read-only unless told.
    trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT
    export GOTOOLCHAIN=local GOFLAGS=-modcacherw GOPATH=$work/gopath GOCACHE=$work/gocache CGO_ENABLED=0
    kube_write_build_module "$go" "$work/module" >"$work/build.log" 2>&1 ||
      { tail -n 20 "$work/build.log" >&2; die "kube_fetch: preparing the build module failed"; }
    local major=${KUBE_VERSION#v} minor
    minor=${major#*.}; minor=${minor%%.*}; major=${major%%.*}
    local version_pkg=k8s.io/component-base/version
    # Without these the apiserver reports v0.0.0-master, which a chart's kubeVersion check refuses.
    local ldflags="-s -w -X $version_pkg.gitVersion=$KUBE_VERSION -X $version_pkg.gitMajor=$major"
    ldflags+=" -X $version_pkg.gitMinor=$minor -X $version_pkg.gitTreeState=clean"
    ldflags+=" -X $version_pkg.buildDate=1970-01-01T00:00:00Z"
    ldflags+=" -X sigs.k8s.io/kwok/pkg/consts.Version=$KUBE_KWOK_VERSION"
    ldflags+=" -X sigs.k8s.io/kwok/pkg/consts.KubeVersion=$KUBE_VERSION"
    # syft names itself in every SBOM it writes; no other command here has a main.version.
    ldflags+=" -X main.version=${KUBE_SYFT_VERSION#v}"
    ldflags+=" -X sigs.k8s.io/release-utils/version.gitVersion=$KUBE_COSIGN_VERSION"
    mkdir -p "$work/out/bin"
    (cd "$work/module" && "$go" build -trimpath -ldflags "$ldflags" -o "$work/out/bin/" \
      k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
      k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubectl \
      k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kube-proxy \
      go.etcd.io/etcd/server/v3 sigs.k8s.io/kwok/cmd/kwok \
      github.com/anchore/syft/cmd/syft "github.com/sigstore/cosign/${KUBE_COSIGN_VERSION%%.*}/cmd/cosign") \
      >>"$work/build.log" 2>&1 ||
      { tail -n 20 "$work/build.log" >&2; die "kube_fetch: building the control plane failed"; }
    # etcd's main package is its module root, so go names the binary after the module's last element.
    mv "$work/out/bin/server" "$work/out/bin/etcd"
    local kwok_dir
    kwok_dir=$(cd "$work/module" && "$go" list -m -f '{{.Dir}}' sigs.k8s.io/kwok)
    cp -r "$kwok_dir/kustomize/stage" "$work/out/kwok-stages"
    # The node's sandbox ("pause") container: no registry is reachable, so it is built from its source.
    local kubernetes_dir
    kubernetes_dir=$(cd "$work/module" && "$go" list -m -f '{{.Dir}}' k8s.io/kubernetes)
    mkdir -p "$work/out/pause"
    cp "$kubernetes_dir/build/pause/linux/pause.c" "$work/out/pause/pause.c"
    chmod -R u+w "$work/out"
    touch "$work/out/complete"
    rm -rf "$dir"
    mv "$work/out" "$dir"
    say "built in $((SECONDS - build_started))s"
  ) 9>"$CHARGE_OUTBOX_CACHE/kube.lock"
}

# kube_write_build_module GO DIR: a module that requires the five releases and imports their commands,
# because `go install pkg@version` refuses modules with replace directives, and kubernetes has them: its
# staging modules (k8s.io/api, client-go...) point into its own tree, which the proxy serves as separate
# modules at v0.<minor>.<patch>. One module, so one compile of every package they share; minimal version
# selection raises some of kubernetes' dependencies to what syft and cosign require (minor versions of
# otel, grpc, x/net...), which kubernetes $KUBE_VERSION compiles with.
kube_write_build_module() {
  local go=$1 module=$2 staging_version=v0.${KUBE_VERSION#v1.} kubernetes_mod
  local cosign_module=github.com/sigstore/cosign/${KUBE_COSIGN_VERSION%%.*}
  # Called on the left of ||, where set -e does not apply: each step returns its own failure.
  mkdir -p "$module" && cd "$module" || return 1
  "$go" mod init charge-outbox.local/kube-build || return 1
  "$go" mod edit -require="k8s.io/kubernetes@$KUBE_VERSION" -require="go.etcd.io/etcd/server/v3@$KUBE_ETCD_VERSION" \
    -require="sigs.k8s.io/kwok@$KUBE_KWOK_VERSION" -require="github.com/anchore/syft@$KUBE_SYFT_VERSION" \
    -require="$cosign_module@$KUBE_COSIGN_VERSION" || return 1
  kubernetes_mod=$("$go" mod download -json "k8s.io/kubernetes@$KUBE_VERSION" | sed -n 's/^\t"GoMod": "\(.*\)",$/\1/p')
  [[ -f $kubernetes_mod ]] || { say "no go.mod for k8s.io/kubernetes@$KUBE_VERSION"; return 1; }
  local staging
  # The proxy refuses the two sample modules (403), and nothing kubernetes requires needs them.
  for staging in $(sed -n 's|^\t\(k8s.io/[^ ]*\) => ./staging/.*|\1|p' "$kubernetes_mod" |
    grep -vx 'k8s.io/sample-cli-plugin\|k8s.io/sample-controller'); do
    "$go" mod edit -replace="$staging=$staging@$staging_version" || return 1
  done
  cat >tools.go <<EOF
//go:build tools

// The commands kube_fetch builds; imported so that go mod tidy records what they need.
package tools

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
	_ "k8s.io/kubernetes/cmd/kube-proxy"
	_ "sigs.k8s.io/kwok/cmd/kwok"
	_ "github.com/anchore/syft/cmd/syft"
	_ "$cosign_module/cmd/cosign"
)
EOF
  [[ -f tools.go ]] || return 1
  "$go" mod tidy
}

# The prometheus-operator CRDs (ServiceMonitor, PodMonitor, PrometheusRule...), from its module's zip on
# the Go module proxy: the chart's optional monitoring objects need their kinds known to the API server.
# kube_fetch_crds DIR; DIR/complete holds the version, so that a new one replaces the old.
kube_fetch_crds() {
  local crds=$1
  [[ $(cat "$crds/complete" 2>/dev/null) == "$KUBE_PROMETHEUS_OPERATOR_VERSION" ]] && return 0
  local go
  go=$(kube_go)
  mkdir -p "$CHARGE_OUTBOX_CACHE"
  (
    flock 9
    [[ $(cat "$crds/complete" 2>/dev/null) == "$KUBE_PROMETHEUS_OPERATOR_VERSION" ]] && exit 0
    local work module_dir
    work=$(mktemp -d "$CHARGE_OUTBOX_CACHE/crds-fetch.XXXXXX")
    trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT
    module_dir=$(GOTOOLCHAIN=local GOFLAGS=-modcacherw GOPATH=$work/gopath GOCACHE=$work/gocache \
      "$go" mod download -json "github.com/prometheus-operator/prometheus-operator@$KUBE_PROMETHEUS_OPERATOR_VERSION" |
      sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
    [[ -d $module_dir/example/prometheus-operator-crd ]] ||
      die "kube_fetch: no example/prometheus-operator-crd in prometheus-operator $KUBE_PROMETHEUS_OPERATOR_VERSION"
    mkdir -p "$work/out"
    cp "$module_dir"/example/prometheus-operator-crd/*.yaml "$work/out/"
    chmod -R u+w "$work/out"
    echo "$KUBE_PROMETHEUS_OPERATOR_VERSION" >"$work/out/complete"
    rm -rf "$crds"
    mv "$work/out" "$crds"
  ) 9>"$CHARGE_OUTBOX_CACHE/prometheus-operator-crds.lock"
}

# The stages kwok runs unless told otherwise: a node becomes Ready and keeps its lease, pods become ready,
# Job pods complete, deleted pods go.
kube_default_stages() {
  local stages=$KUBE_BIN_DIR/../kwok-stages
  printf '%s\n' "$stages/node/fast/node-initialize.yaml" \
    "$stages/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml" \
    "$stages/pod/fast/pod-ready.yaml" "$stages/pod/fast/pod-complete.yaml" "$stages/pod/fast/pod-delete.yaml"
}

# kube_issue_cert PKI_DIR NAME SUBJECT EXTENSIONS: NAME.key and NAME.crt signed by PKI_DIR/ca. EC keys:
# a few milliseconds each, where RSA takes most of a second on a loaded machine.
kube_issue_cert() {
  local pki=$1 name=$2 subject=$3 extensions=$4
  openssl req -new -nodes -newkey ec -pkeyopt ec_paramgen_curve:P-256 -keyout "$pki/$name.key" \
    -out "$pki/$name.csr" -subj "$subject" 2>/dev/null
  openssl x509 -req -in "$pki/$name.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -CAcreateserial -days 30 \
    -out "$pki/$name.crt" -extfile <(printf '%s\n' "$extensions") 2>/dev/null
  rm -f "$pki/$name.csr"
}

# kube_write_kubeconfig FILE SERVER PKI_DIR CLIENT_NAME
kube_write_kubeconfig() {
  cat >"$1" <<KUBECONFIG
apiVersion: v1
kind: Config
clusters:
- name: local
  cluster: {server: "$2", certificate-authority: "$3/ca.crt"}
users:
- name: $4
  user: {client-certificate: "$3/$4.crt", client-key: "$3/$4.key"}
contexts:
- name: local
  context: {cluster: local, user: $4}
current-context: local
KUBECONFIG
}

kube_write_pki() {
  local pki=$1
  mkdir -p "$pki"
  openssl req -x509 -new -nodes -newkey ec -pkeyopt ec_paramgen_curve:P-256 -keyout "$pki/ca.key" \
    -out "$pki/ca.crt" -days 30 -subj /CN=charge-outbox-test-ca \
    -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign 2>/dev/null
  # 10.96.0.1 is the first address of the service range: in-cluster clients reach "kubernetes" there.
  kube_issue_cert "$pki" apiserver /CN=kube-apiserver "$(printf '%s\n' \
    'extendedKeyUsage=serverAuth' 'keyUsage=critical,digitalSignature,keyEncipherment' \
    'subjectAltName=IP:127.0.0.1,IP:10.96.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local')"
  local client=('extendedKeyUsage=clientAuth' 'keyUsage=critical,digitalSignature,keyEncipherment')
  # RBAC knows these users by name: system:masters is cluster-admin; the other two have bootstrap roles.
  kube_issue_cert "$pki" admin /O=system:masters/CN=admin "$(printf '%s\n' "${client[@]}")"
  kube_issue_cert "$pki" controller-manager /CN=system:kube-controller-manager "$(printf '%s\n' "${client[@]}")"
  kube_issue_cert "$pki" scheduler /CN=system:kube-scheduler "$(printf '%s\n' "${client[@]}")"
  openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$pki/service-account.key" 2>/dev/null
  openssl pkey -in "$pki/service-account.key" -pubout -out "$pki/service-account.pub" 2>/dev/null
}

# kube_start STATE_DIR [STAGE_FILE...]: the control plane and one fake node, every port a free loopback
# one; kwok runs the given stages (kube_default_stages if none). KUBE_FAKE_NODE=0: no fake node (a real
# one joins with kube_node_start). Sets KUBE_KUBECONFIG (also written as STATE_DIR/admin.kubeconfig).
# Logs in STATE_DIR/logs. The API server reaches kubelets (logs, exec) with the admin certificate.
kube_start() {
  local state=$1; shift
  [[ -x ${KUBE_BIN_DIR:-}/kube-apiserver ]] || die "kube_start: no control plane binaries; call kube_fetch first"
  local stage_files=("$@")
  ((${#stage_files[@]} > 0)) || mapfile -t stage_files < <(kube_default_stages)
  local pki=$state/pki logs=$state/logs pids=$state/pids started=$SECONDS
  mkdir -p "$logs" "$pids"
  kube_write_pki "$pki"
  local etcd_port etcd_peer_port api_port controller_manager_port scheduler_port kwok_port
  etcd_port=$(free_port); etcd_peer_port=$(free_port); api_port=$(free_port)
  controller_manager_port=$(free_port); scheduler_port=$(free_port); kwok_port=$(free_port)
  local server=https://127.0.0.1:$api_port
  KUBE_KUBECONFIG=$state/admin.kubeconfig
  kube_write_kubeconfig "$KUBE_KUBECONFIG" "$server" "$pki" admin
  kube_write_kubeconfig "$state/controller-manager.kubeconfig" "$server" "$pki" controller-manager
  kube_write_kubeconfig "$state/scheduler.kubeconfig" "$server" "$pki" scheduler

  # No fsync: the cluster lives as long as one test, and fsync is most of etcd's time on a shared disk.
  start_daemon "$pids/etcd.pid" "$logs/etcd.log" "$KUBE_BIN_DIR/etcd" --name=test \
    --data-dir="$state/etcd" --unsafe-no-fsync \
    --listen-client-urls="http://127.0.0.1:$etcd_port" --advertise-client-urls="http://127.0.0.1:$etcd_port" \
    --listen-peer-urls="http://127.0.0.1:$etcd_peer_port" \
    --initial-advertise-peer-urls="http://127.0.0.1:$etcd_peer_port" \
    --initial-cluster="test=http://127.0.0.1:$etcd_peer_port"
  # Node,RBAC as in a real cluster, so the chart's RBAC objects are checked as written. No endpoint
  # reconciler: the only apiserver listens on loopback, which the "kubernetes" Service may not point to.
  start_daemon "$pids/kube-apiserver.pid" "$logs/kube-apiserver.log" "$KUBE_BIN_DIR/kube-apiserver" \
    --etcd-servers="http://127.0.0.1:$etcd_port" --bind-address=127.0.0.1 --advertise-address=127.0.0.1 \
    --secure-port="$api_port" --tls-cert-file="$pki/apiserver.crt" --tls-private-key-file="$pki/apiserver.key" \
    --client-ca-file="$pki/ca.crt" --authorization-mode=Node,RBAC --endpoint-reconciler-type=none \
    --service-cluster-ip-range=10.96.0.0/16 --allow-privileged=true \
    --service-account-issuer=https://kubernetes.default.svc.cluster.local \
    --service-account-key-file="$pki/service-account.pub" \
    --service-account-signing-key-file="$pki/service-account.key" \
    --kubelet-client-certificate="$pki/admin.crt" --kubelet-client-key="$pki/admin.key" \
    --kubelet-preferred-address-types=InternalIP
  kube_wait_api "$state" 90
  start_daemon "$pids/kube-controller-manager.pid" "$logs/kube-controller-manager.log" \
    "$KUBE_BIN_DIR/kube-controller-manager" --kubeconfig="$state/controller-manager.kubeconfig" \
    --bind-address=127.0.0.1 --secure-port="$controller_manager_port" --leader-elect=false \
    --use-service-account-credentials=true --root-ca-file="$pki/ca.crt" \
    --service-account-private-key-file="$pki/service-account.key"
  start_daemon "$pids/kube-scheduler.pid" "$logs/kube-scheduler.log" "$KUBE_BIN_DIR/kube-scheduler" \
    --kubeconfig="$state/scheduler.kubeconfig" --bind-address=127.0.0.1 --secure-port="$scheduler_port" \
    --leader-elect=false
  if [[ ${KUBE_FAKE_NODE:-1} == 0 ]]; then
    say "Kubernetes $KUBE_VERSION on $server after $((SECONDS - started))s, no node yet (logs: $logs)"
    return 0
  fi
  local stage_file
  for stage_file in "${stage_files[@]}"; do
    [[ -f $stage_file ]] || die "kube_start: no kwok stage file $stage_file"
    cat "$stage_file"
    printf '\n---\n'
  done >"$state/kwok-stages.yaml"
  # kwok manages only the node annotated below: nothing else in the cluster is faked. Its lease renewal is
  # the node's heartbeat (the node controller would otherwise mark the node NotReady after 50 s).
  start_daemon "$pids/kwok.pid" "$logs/kwok.log" "$KUBE_BIN_DIR/kwok" --kubeconfig="$KUBE_KUBECONFIG" \
    --config="$state/kwok-stages.yaml" \
    --manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake --node-lease-duration-seconds=40 \
    --server-address="127.0.0.1:$kwok_port"
  kube_kubectl "$state" apply -f - >/dev/null <<NODE
apiVersion: v1
kind: Node
metadata:
  name: $KUBE_NODE_NAME
  annotations: {kwok.x-k8s.io/node: fake}
  labels: {kubernetes.io/hostname: $KUBE_NODE_NAME, kubernetes.io/os: linux, kubernetes.io/arch: amd64, type: kwok}
NODE
  kube_kubectl "$state" wait --for=condition=Ready "node/$KUBE_NODE_NAME" --timeout=90s >/dev/null ||
    die "kube_start: node $KUBE_NODE_NAME not Ready within 90 s; see $logs/kwok.log"
  say "Kubernetes $KUBE_VERSION on $server, node $KUBE_NODE_NAME Ready after $((SECONDS - started))s (logs: $logs)"
}

kube_kubectl() { local state=$1; shift; "$KUBE_BIN_DIR/kubectl" --kubeconfig="$state/admin.kubeconfig" "$@"; }

# kube_use STATE_DIR: kubectl and helm in this shell talk to the cluster of STATE_DIR and keep their own
# state there.
kube_use() {
  export KUBECONFIG=$1/admin.kubeconfig HELM_CACHE_HOME=$1/helm/cache HELM_CONFIG_HOME=$1/helm/config \
    HELM_DATA_HOME=$1/helm/data
}

# kube_print_logs STATE_DIR: the last lines of every process's log, for a test that failed.
kube_print_logs() {
  local log
  [[ -d $1/logs ]] || return 0
  for log in "$1"/logs/*.log; do
    printf -- '--- last lines of %s\n' "$(basename "$log")" >&2
    tail -n 8 "$log" >&2
  done
}

# kube_wait_api STATE_DIR TIMEOUT_S: until the apiserver says it is ready (etcd reached, bootstrap RBAC
# and priority levels written).
kube_wait_api() {
  local state=$1 deadline=$((SECONDS + $2))
  while ((SECONDS < deadline)); do
    kube_kubectl "$state" get --raw /readyz >/dev/null 2>&1 && return 0
    pid_alive "$state/pids/kube-apiserver.pid" || break
    sleep 0.2
  done
  tail -n 20 "$state/logs/kube-apiserver.log" >&2 || true
  die "kube_start: kube-apiserver not ready within $2 s; see $state/logs/kube-apiserver.log"
}

# kube_stop STATE_DIR: stops what kube_start started there, clients first so that none logs a lost server.
kube_stop() {
  local state=$1 name
  for name in kwok kube-scheduler kube-controller-manager kube-apiserver etcd; do
    stop_pid_file "$state/pids/$name.pid" 10
  done
}
