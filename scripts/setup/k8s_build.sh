# k8s_build WORKDIR BINDIR CMD...: builds Kubernetes commands (kube-apiserver, kubelet, ...) of
# $KUBERNETES_VERSION from the Go module proxy into BINDIR. Sourced after common.sh, never run.
# k8s.io/kubernetes cannot be `go install`ed directly: its go.mod replaces the staging modules
# (k8s.io/api, ...) with local paths. A wrapper module in WORKDIR requires k8s.io/kubernetes and
# replaces every staging module with its published v0.X.Y instead. Every wrapper shares one
# GOCACHE, so packages common to several commands are compiled once.
k8s_build() {
  local work="$1" bin="$2"
  shift 2
  mkdir -p "$work" "$bin"
  go_env "$GO_TOOLCHAIN" -mod=mod
  local staging_minor="v0.${KUBERNETES_VERSION#1.}" upstream_mod cmd
  # The upstream go.mod names every staging module in its replace block.
  upstream_mod="$(cd "$work" && GOTOOLCHAIN=local go mod download -json "k8s.io/kubernetes@v$KUBERNETES_VERSION" \
    | python3 -c 'import json,sys; print(json.load(sys.stdin)["GoMod"])')"
  {
    echo "module sparkdlq.local/kubebuild"
    echo
    echo "go 1.22.0"
    echo
    echo "require k8s.io/kubernetes v$KUBERNETES_VERSION"
    echo
    grep -oE '^\s*k8s\.io/[a-z0-9-]+ => \./staging/src/k8s\.io/[a-z0-9-]+' "$upstream_mod" \
      | awk -v v="$staging_minor" '{print "replace " $1 " => " $1 " " v}'
  } > "$work/go.mod"
  {
    printf '//go:build tools\n\npackage kubebuild\n\nimport (\n'
    for cmd in "$@"; do printf '\t_ "k8s.io/kubernetes/cmd/%s"\n' "$cmd"; done
    printf ')\n'
  } > "$work/tools.go"
  (cd "$work" && go mod tidy -e >/dev/null 2>&1) || true
  # Stamp the version the way Kubernetes' own build does, so clients see v1.30.x, not v0.0.0.
  local pkg=k8s.io/component-base/version ldflags
  ldflags="-s -w -X $pkg.gitVersion=v$KUBERNETES_VERSION -X $pkg.gitMajor=1"
  ldflags+=" -X $pkg.gitMinor=$(cut -d. -f2 <<<"$KUBERNETES_VERSION") -X $pkg.gitTreeState=clean"
  ldflags+=" -X k8s.io/client-go/pkg/version.gitVersion=v$KUBERNETES_VERSION"
  for cmd in "$@"; do
    log "  go build $cmd"
    (cd "$work" && go build -ldflags "$ldflags" -o "$bin/$cmd" "k8s.io/kubernetes/cmd/$cmd")
  done
}
