# A real Kubernetes node beside kube_start's control plane: containerd, kubelet and kube-proxy on this
# machine, pods on a bridge of their own, the project's image imported. Pods run for real: probes,
# security contexts, Secrets, Services. Facts and caveats: ../shared/notes/kubernetes-real-node.md.
# Sourced; needs common.sh and kube.sh (kube_fetch builds kubelet and kube-proxy with the control plane).
# Root only: containers, mounts, a bridge, iptables.
#
#   kube_node_fetch                 the sandbox ("pause") image, built from its source once, into the cache
#   kube_node_start STATE_DIR [OCI_ARCHIVE...]
#                                   after kube_start: node $KUBE_REAL_NODE_NAME Ready, the archives imported
#                                   (each also under docker.io/library/, the name the kubelet looks up)
#   kube_node_stop STATE_DIR        ordered teardown, before kube_stop: nothing is left on the host
#   kube_node_ip                    the address pods reach this machine at (services on the host listen there:
#                                   the kubelet's firewall drops pod traffic to 127/8)
#
# Pods get 10.244.0.0/24 on the bridge $KUBE_NODE_BRIDGE. There is no cluster DNS: pods reach Services by
# their IPs and the *_SERVICE_HOST variables, and the host by kube_node_ip. The bridge plugin does not
# enforce NetworkPolicies (the API server accepts them).

KUBE_REAL_NODE_NAME=node-0
KUBE_NODE_POD_CIDR=10.244.0.0/24
KUBE_NODE_BRIDGE=co-pods0
KUBE_PAUSE_IMAGE=registry.k8s.io/pause:3.10

kube_node_ip() {
  ip -4 route get 1.1.1.1 2>/dev/null | sed -n 's/.* src \([0-9.]*\).*/\1/p' | head -n 1
}

kube_node_pause_archive() { echo "$CHARGE_OUTBOX_CACHE/kube-pause-$KUBE_VERSION/pause.oci.tar"; }

# The pause binary from kubernetes' own source (kube_fetch keeps it beside the binaries), static, in a
# one-layer OCI image written by hand: nothing to pull, nothing else in it.
kube_node_fetch() {
  local archive
  archive=$(kube_node_pause_archive)
  [[ -f $archive ]] && return 0
  local source=$KUBE_BIN_DIR/../pause/pause.c
  [[ -f $source ]] || die "kube_node_fetch: no $source; call kube_fetch first"
  local dir work
  dir=$(dirname "$archive")
  mkdir -p "$dir"
  work=$(mktemp -d "$dir/build.XXXXXX")
  (
    set -e
    cd "$work"
    gcc -Os -static -o pause "$source" -DVERSION="$KUBE_VERSION"
    strip pause
    mkdir -p layout/blobs/sha256
    tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -cf layer.tar pause
    local layer_digest layer_size config_digest config_size manifest_digest manifest_size
    layer_digest=$(sha256sum layer.tar | cut -d' ' -f1)
    layer_size=$(stat -c %s layer.tar)
    mv layer.tar "layout/blobs/sha256/$layer_digest"
    printf '{"architecture":"amd64","os":"linux","config":{"Entrypoint":["/pause"],"User":"65535:65535"},"rootfs":{"type":"layers","diff_ids":["sha256:%s"]}}' \
      "$layer_digest" >config.json
    config_digest=$(sha256sum config.json | cut -d' ' -f1)
    config_size=$(stat -c %s config.json)
    mv config.json "layout/blobs/sha256/$config_digest"
    printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:%s","size":%s},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar","digest":"sha256:%s","size":%s}]}' \
      "$config_digest" "$config_size" "$layer_digest" "$layer_size" >manifest.json
    manifest_digest=$(sha256sum manifest.json | cut -d' ' -f1)
    manifest_size=$(stat -c %s manifest.json)
    mv manifest.json "layout/blobs/sha256/$manifest_digest"
    printf '{"schemaVersion":2,"manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:%s","size":%s,"annotations":{"org.opencontainers.image.ref.name":"%s"}}]}' \
      "$manifest_digest" "$manifest_size" "$KUBE_PAUSE_IMAGE" >layout/index.json
    printf '{"imageLayoutVersion":"1.0.0"}' >layout/oci-layout
    tar -C layout -cf pause.oci.tar oci-layout index.json blobs
    mv pause.oci.tar "$archive"
  ) || { rm -rf "$work"; die "kube_node_fetch: building the pause image failed"; }
  rm -rf "$work"
}

kube_node_ctr() { ctr --address "$1/node/containerd.sock" --namespace k8s.io "${@:2}"; }

# kube_node_start STATE_DIR [OCI_ARCHIVE...]
kube_node_start() {
  local state=$1; shift
  [[ $(id -u) -eq 0 ]] || die "kube_node_start: a real node needs root (containers, mounts, iptables)"
  local binary
  for binary in containerd runc ctr iptables; do
    command -v "$binary" >/dev/null || die "kube_node_start: $binary is missing; run deploy/local/install-deps"
  done
  [[ -x $KUBE_BIN_DIR/kubelet ]] || die "kube_node_start: no kubelet in $KUBE_BIN_DIR; call kube_fetch"
  kube_node_fetch
  local node=$state/node logs=$state/logs pids=$state/pids pki=$state/pki started=$SECONDS node_ip
  node_ip=$(kube_node_ip)
  [[ -n $node_ip ]] || die "kube_node_start: this machine has no routable IPv4 address for its node"
  mkdir -p "$node/cni" "$node/kubelet" "$node/containerd"
  # Network namespaces that exist before the node do not belong to it (teardown removes only the others).
  ls /run/netns 2>/dev/null | sort >"$node/netns-before" || true

  kube_issue_cert "$pki" kubelet "/O=system:nodes/CN=system:node:$KUBE_REAL_NODE_NAME" \
    "$(printf '%s\n' 'extendedKeyUsage=clientAuth' 'keyUsage=critical,digitalSignature,keyEncipherment')"
  kube_issue_cert "$pki" kube-proxy /CN=system:kube-proxy \
    "$(printf '%s\n' 'extendedKeyUsage=clientAuth' 'keyUsage=critical,digitalSignature,keyEncipherment')"
  local server
  server=$(sed -n 's/.*server: "\(.*\)".*/\1/p' "$state/admin.kubeconfig")
  kube_write_kubeconfig "$node/kubelet.kubeconfig" "$server" "$pki" kubelet
  kube_write_kubeconfig "$node/kube-proxy.kubeconfig" "$server" "$pki" kube-proxy

  cat >"$node/cni/10-charge-outbox.conflist" <<CNI
{
  "cniVersion": "1.0.0",
  "name": "charge-outbox-pods",
  "plugins": [
    {"type": "bridge", "bridge": "$KUBE_NODE_BRIDGE", "isGateway": true, "ipMasq": true, "hairpinMode": true,
     "ipam": {"type": "host-local", "dataDir": "$node/cni-ipam", "ranges": [[{"subnet": "$KUBE_NODE_POD_CIDR"}]],
              "routes": [{"dst": "0.0.0.0/0"}]}},
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
CNI
  # restrict_oom_score_adj: this machine's root lacks CAP_SYS_RESOURCE, so runc may not lower a score.
  cat >"$node/containerd.toml" <<TOML
version = 2
root = "$node/containerd/root"
state = "$node/containerd/state"
[grpc]
  address = "$node/containerd.sock"
[plugins."io.containerd.internal.v1.opt"]
  path = "$node/containerd/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$KUBE_PAUSE_IMAGE"
  restrict_oom_score_adj = true
  disable_apparmor = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$node/cni"
TOML
  start_daemon "$pids/containerd.pid" "$logs/containerd.log" containerd --config "$node/containerd.toml"
  local deadline=$((SECONDS + 30))
  until ctr --address "$node/containerd.sock" version >/dev/null 2>&1; do
    ((SECONDS < deadline)) && pid_alive "$pids/containerd.pid" ||
      { tail -n 20 "$logs/containerd.log" >&2; die "kube_node_start: containerd did not start"; }
    sleep 0.2
  done
  local archive name
  for archive in "$(kube_node_pause_archive)" "$@"; do
    kube_node_ctr "$state" images import --all-platforms "$archive" >"$node/import.out" 2>&1 ||
      { cat "$node/import.out" >&2; die "kube_node_start: importing $archive failed"; }
  done
  # The CRI looks images up by their normalized name; an archive's "name:tag" becomes docker.io/library/.
  for name in $(kube_node_ctr "$state" images ls -q); do
    [[ $name == */* || $name == sha256:* ]] && continue
    kube_node_ctr "$state" images tag --force "$name" "docker.io/library/$name" >/dev/null
  done

  local kubelet_port healthz_port proxy_metrics_port proxy_healthz_port
  kubelet_port=$(free_port); healthz_port=$(free_port); proxy_metrics_port=$(free_port)
  proxy_healthz_port=$(free_port)
  # cgroup v1 and containerd 1.6 here: failCgroupV1 false and the cgroupfs driver (see the notes). No
  # eviction or image GC on a shared disk that is mostly someone else's.
  cat >"$node/kubelet.yaml" <<YAML
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $node_ip
port: $kubelet_port
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: $healthz_port
containerRuntimeEndpoint: unix://$node/containerd.sock
cgroupDriver: cgroupfs
failCgroupV1: false
failSwapOn: false
oomScoreAdj: 0
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $pki/ca.crt}
authorization: {mode: Webhook}
clusterDomain: cluster.local
resolvConf: /etc/resolv.conf
evictionHard: {memory.available: "100Mi", nodefs.available: "1%", nodefs.inodesFree: "1%", imagefs.available: "1%"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
serializeImagePulls: false
YAML
  start_daemon "$pids/kubelet.pid" "$logs/kubelet.log" "$KUBE_BIN_DIR/kubelet" --config="$node/kubelet.yaml" \
    --kubeconfig="$node/kubelet.kubeconfig" --root-dir="$node/kubelet" --cert-dir="$node/kubelet/pki" \
    --hostname-override="$KUBE_REAL_NODE_NAME" --node-ip="$node_ip" --v=1
  cat >"$node/kube-proxy.yaml" <<YAML
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: $node/kube-proxy.kubeconfig}
mode: iptables
clusterCIDR: $KUBE_NODE_POD_CIDR
hostnameOverride: $KUBE_REAL_NODE_NAME
oomScoreAdj: 0
conntrack: {maxPerCore: 0}
healthzBindAddress: 127.0.0.1:$proxy_healthz_port
metricsBindAddress: 127.0.0.1:$proxy_metrics_port
YAML
  start_daemon "$pids/kube-proxy.pid" "$logs/kube-proxy.log" "$KUBE_BIN_DIR/kube-proxy" \
    --config="$node/kube-proxy.yaml" --v=1
  kube_kubectl "$state" wait --for=condition=Ready "node/$KUBE_REAL_NODE_NAME" --timeout=120s >/dev/null 2>&1 || {
    local waited=0
    until kube_kubectl "$state" get "node/$KUBE_REAL_NODE_NAME" >/dev/null 2>&1 || ((waited++ > 60)); do sleep 1; done
    kube_kubectl "$state" wait --for=condition=Ready "node/$KUBE_REAL_NODE_NAME" --timeout=60s >/dev/null ||
      { tail -n 20 "$logs/kubelet.log" >&2; die "kube_node_start: node $KUBE_REAL_NODE_NAME not Ready; see $logs/kubelet.log"; }
  }
  # A pod created before its namespace's default ServiceAccount exists is refused.
  deadline=$((SECONDS + 60))
  until kube_kubectl "$state" -n default get serviceaccount default >/dev/null 2>&1; do
    ((SECONDS < deadline)) || die "kube_node_start: no default ServiceAccount after 60 s"
    sleep 0.5
  done
  say "node $KUBE_REAL_NODE_NAME ($node_ip) Ready after $((SECONDS - started))s"
}

# kube_node_stop STATE_DIR: pods first (their sandboxes release network and mounts through the CNI and the
# kubelet), then kube-proxy and the kubelet, then containers and shims that outlive them, containerd,
# the mounts, the bridge, the iptables chains and the cgroups. Every step tolerates a node half started.
kube_node_stop() {
  local state=$1 node=$1/node pids=$1/pids
  [[ -d $node ]] || return 0
  if pid_alive "$pids/kubelet.pid" && pid_alive "$pids/kube-apiserver.pid"; then
    kube_kubectl "$state" delete pods --all --all-namespaces --grace-period=5 --timeout=60s --wait \
      >/dev/null 2>&1 || true
  fi
  stop_pid_file "$pids/kube-proxy.pid" 10
  stop_pid_file "$pids/kubelet.pid" 10
  if pid_alive "$pids/containerd.pid"; then
    local sandbox
    for sandbox in $(kube_node_ctr "$state" tasks ls -q 2>/dev/null); do
      kube_node_ctr "$state" tasks kill --signal SIGKILL "$sandbox" >/dev/null 2>&1 || true
    done
    sleep 0.5
    for sandbox in $(kube_node_ctr "$state" containers ls -q 2>/dev/null); do
      kube_node_ctr "$state" tasks delete --force "$sandbox" >/dev/null 2>&1 || true
      kube_node_ctr "$state" containers delete "$sandbox" >/dev/null 2>&1 || true
    done
  fi
  stop_pid_file "$pids/containerd.pid" 10
  # Shims are their own processes; each names our socket on its command line.
  pkill -KILL -f "containerd-shim-runc-v2 .*-address $node/containerd.sock" 2>/dev/null || true
  local mount_point
  for mount_point in $(awk -v prefix="$node/" 'index($2, prefix) == 1 {print $2}' /proc/mounts | sort -r); do
    umount -l "$mount_point" 2>/dev/null || true
  done
  if [[ -f $node/netns-before ]]; then
    local netns
    for netns in $(ls /run/netns 2>/dev/null | sort | comm -13 "$node/netns-before" -); do
      umount -l "/run/netns/$netns" 2>/dev/null || true
      rm -f "/run/netns/$netns"
    done
  fi
  ip link delete "$KUBE_NODE_BRIDGE" 2>/dev/null || true
  [[ -x $KUBE_BIN_DIR/kube-proxy ]] && "$KUBE_BIN_DIR/kube-proxy" --cleanup >/dev/null 2>&1 || true
  kube_node_remove_chains
  local cgroup
  for cgroup in $(find /sys/fs/cgroup/*/kubepods /sys/fs/cgroup/*/k8s.io -depth -type d 2>/dev/null); do
    rmdir "$cgroup" 2>/dev/null || true
  done
  chmod -R u+w "$node" 2>/dev/null || true
}

# The chains the kubelet and the bridge plugin's masquerade leave behind (kube-proxy --cleanup takes its own).
kube_node_remove_chains() {
  local tool table chain
  for tool in iptables ip6tables; do
    command -v "$tool" >/dev/null || continue
    for table in filter nat mangle; do
      for chain in $("$tool" -t "$table" -S 2>/dev/null | sed -n 's/^-N \(KUBE-[A-Z-]*\|CNI-[A-Za-z0-9-]*\)$/\1/p'); do
        "$tool" -t "$table" -S 2>/dev/null | grep -- "-j $chain\b" | grep '^-A' | sed 's/^-A/-D/' |
          while read -r rule; do eval "$tool -t $table $rule" 2>/dev/null || true; done
      done
      for chain in $("$tool" -t "$table" -S 2>/dev/null | sed -n 's/^-N \(KUBE-[A-Z-]*\|CNI-[A-Za-z0-9-]*\)$/\1/p'); do
        "$tool" -t "$table" -F "$chain" 2>/dev/null || true
      done
      for chain in $("$tool" -t "$table" -S 2>/dev/null | sed -n 's/^-N \(KUBE-[A-Z-]*\|CNI-[A-Za-z0-9-]*\)$/\1/p'); do
        "$tool" -t "$table" -X "$chain" 2>/dev/null || true
      done
    done
  done
}
