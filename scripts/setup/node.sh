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
if [[ -f "$bin/.complete-node" ]]; then
  log "kubelet, kube-scheduler and kube-proxy $KUBERNETES_VERSION: cached in $bin"
else
  log "building kubelet, kube-scheduler and kube-proxy $KUBERNETES_VERSION (first run: several minutes)"
  k8s_build "$SPARK_DLQ_CACHE/kubernetes/v$KUBERNETES_VERSION/wrapper-node" "$bin" \
    kubelet kube-scheduler kube-proxy
  touch "$bin/.complete-node"
  log "built into $bin"
fi

# go_install NAME MODULE@VERSION: a Go command from the proxy, with the Go its go.mod asks for
# (GOTOOLCHAIN=auto takes a newer one from the proxy if the machine's is older).
go_install() {
  local dest="$SPARK_DLQ_CACHE/node/$1"
  if [[ -f "$dest/.complete" ]]; then
    log "$2: cached in $dest"
    return
  fi
  log "building $2 (first run: a few minutes)"
  mkdir -p "$dest"
  (
    export GOPATH="$SPARK_DLQ_CACHE/go" GOMODCACHE="$SPARK_DLQ_CACHE/go/pkg/mod"
    export GOCACHE="$SPARK_DLQ_CACHE/go/cache" GOTOOLCHAIN=auto GOFLAGS=-mod=mod CGO_ENABLED=0
    cd "$dest" && GOBIN="$dest" go install -ldflags "-s -w" "$2"
  )
  touch "$dest/.complete"
}
go_install "coredns-$COREDNS_VERSION" "github.com/coredns/coredns@$COREDNS_VERSION"
go_install "crictl-$CRI_TOOLS_VERSION" "sigs.k8s.io/cri-tools/cmd/crictl@$CRI_TOOLS_VERSION"

# The images' folder and tag: a hash of their sources, computed where the fixtures compute it
# (paths.py needs only the standard library, so the system Python runs it).
hash="$(PYTHONPATH="$REPO_ROOT/devtools" python3 -c \
  'from spark_dlq_devtools.paths import node_images_digest; print(node_images_digest())')"
images="$SPARK_DLQ_CACHE/node/images-$hash"
if [[ -f "$images/.complete" ]]; then
  log "the node's images: cached in $images"
else
  log "building the node's images (pause, probe) into $images"
  rm -rf "$images" && mkdir -p "$images/bin"
  (
    export GOPATH="$SPARK_DLQ_CACHE/go" GOMODCACHE="$SPARK_DLQ_CACHE/go/pkg/mod"
    export GOCACHE="$SPARK_DLQ_CACHE/go/cache" GOTOOLCHAIN="$GO_TOOLCHAIN" CGO_ENABLED=0
    cd "$REPO_ROOT/devtools/node-images"
    go build -trimpath -ldflags "-s -w" -o "$images/bin/" ./cmd/pause ./cmd/probe
  )
  oci="$REPO_ROOT/devtools/spark_dlq_devtools/oci.py"
  python3 "$oci" "$images/pause.tar" "spark-dlq.local/pause:$hash" /pause "$images/bin/pause=pause" >/dev/null
  python3 "$oci" "$images/probe.tar" "spark-dlq.local/probe:$hash" /probe "$images/bin/probe=probe" >/dev/null
  touch "$images/.complete"
fi
