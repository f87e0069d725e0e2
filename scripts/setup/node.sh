#!/usr/bin/env bash
# Installs what the test bed's Kubernetes node needs (spark_dlq_devtools.node): containerd,
# runc, the CNI plugins, iptables and conntrack from Debian; kubelet, kube-scheduler and
# kube-proxy of $KUBERNETES_VERSION (k8s_build.sh, beside the control plane's binaries);
# CoreDNS and crictl from the Go module proxy; and the node's own images (its sandbox "pause"
# image and the probe image of the cluster tests), built from devtools/node-images as OCI
# archives. Each part is cached under $SPARK_DLQ_CACHE with a marker; a second run only says
# where it is.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
source "$(dirname "${BASH_SOURCE[0]}")/k8s_build.sh"

packages=(containerd runc containernetworking-plugins iptables conntrack)
missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q 'install ok installed' || missing+=("$package")
done
if ((${#missing[@]})); then
  log "installing ${missing[*]} from Debian"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null || true
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
log "containerd $(dpkg-query -W -f='${Version}' containerd), runc $(dpkg-query -W -f='${Version}' runc), CNI plugins $(dpkg-query -W -f='${Version}' containernetworking-plugins)"

bin="$SPARK_DLQ_CACHE/kubernetes/v$KUBERNETES_VERSION/bin"
# Beside the control plane's binaries (kubernetes.sh): built in place, with a marker of their own.
node_binaries() {  # node_binaries OUT
  log "building kubelet, kube-scheduler and kube-proxy $KUBERNETES_VERSION (first run: several minutes)"
  k8s_build "$SPARK_DLQ_CACHE/kubernetes/v$KUBERNETES_VERSION/wrapper-node" "$1" kubelet kube-scheduler kube-proxy
}
cached_step --in-place --marker .complete-node "$bin" \
  "kubelet, kube-scheduler and kube-proxy $KUBERNETES_VERSION" node_binaries

# go_install OUT MODULE@VERSION: a Go command from the proxy, with the Go its go.mod asks for
# (GOTOOLCHAIN=auto takes a newer one from the proxy if the machine's is older).
go_install() {
  log "building $2 (first run: a few minutes)"
  (
    go_env auto -mod=mod
    cd "$1" && GOBIN="$1" CGO_ENABLED=0 go install -ldflags "-s -w" "$2"
  )
}
module="github.com/coredns/coredns@$COREDNS_VERSION"
cached_step "$SPARK_DLQ_CACHE/node/coredns-$COREDNS_VERSION" "$module" go_install "$module"
module="sigs.k8s.io/cri-tools/cmd/crictl@$CRI_TOOLS_VERSION"
cached_step "$SPARK_DLQ_CACHE/node/crictl-$CRI_TOOLS_VERSION" "$module" go_install "$module"

# The images' folder and tag: a key of their sources (spark_dlq_devtools.cache_keys; the fixtures
# find them with the same key).
hash="$(cache_key node-images "$REPO_ROOT/devtools")"
node_images() {  # node_images OUT
  local images="$1"
  log "building the node's images (pause, probe) into $SPARK_DLQ_CACHE/node/images-$hash"
  mkdir -p "$images/bin"
  (
    go_env "$GO_TOOLCHAIN"
    cd "$REPO_ROOT/devtools/node-images"
    CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$images/bin/" ./cmd/pause ./cmd/probe
  )
  local oci="$REPO_ROOT/devtools/spark_dlq_devtools/oci.py"
  python3 "$oci" "$images/pause.tar" "spark-dlq.local/pause:$hash" /pause "$images/bin/pause=pause" >/dev/null
  python3 "$oci" "$images/probe.tar" "spark-dlq.local/probe:$hash" /probe "$images/bin/probe=probe" >/dev/null
}
cached_step "$SPARK_DLQ_CACHE/node/images-$hash" "the node's images" node_images
