# The set-up steps' plumbing, written once: a cached step, the Go environment, a Maven fetch, a
# jar build, and the cache keys. Sourced by common.sh, never run.
#
# A step is cached in a folder of $SPARK_DLQ_CACHE named by what it is built from (its versions,
# or a key from cache_key); a marker file in the folder says the build finished. A folder with
# its marker is whole and is never touched again; one without is rebuilt from nothing.

log() { printf '[setup] %s\n' "$*" >&2; }

# cached_step [--in-place] [--marker NAME] DEST WHAT BUILD [ARGS...]: one cached part of the
# set-up. When DEST holds its marker (.complete, or NAME), says "WHAT: cached in DEST" and does
# nothing else. Otherwise runs `BUILD OUT ARGS...`, which builds into the folder OUT and says
# what it builds: OUT is a new folder beside DEST (the same file system), moved into place with
# its marker only when BUILD has finished, so an interrupted build leaves no half-made DEST.
# --in-place: OUT is DEST itself, as it is, for what cannot move or shares its folder (a
# virtualenv, whose scripts name their own path; the Kubernetes binaries of two steps); the
# marker is written when BUILD has finished.
cached_step() {
  local in_place=false marker=.complete
  while [[ "$1" == --* ]]; do
    case "$1" in
      --in-place) in_place=true; shift ;;
      --marker) marker="$2"; shift 2 ;;
      *) log "cached_step: unknown option $1"; return 2 ;;
    esac
  done
  local dest="$1" what="$2" build="$3" began=$SECONDS
  shift 3
  if [[ -f "$dest/$marker" ]]; then
    log "$what: cached in $dest"
    return 0
  fi
  if $in_place; then
    mkdir -p "$dest"
    "$build" "$dest" "$@"
    touch "$dest/$marker"
  else
    mkdir -p "$(dirname "$dest")"
    # What an interrupted build of DEST left beside it.
    rm -rf "$dest".partial-*
    local out
    out="$(mktemp -d "$dest.partial-XXXXXX")"
    chmod 755 "$out"
    "$build" "$out" "$@"
    touch "$out/$marker"
    rm -rf "$dest"
    mv "$out" "$dest"
  fi
  log "$what: built into $dest in $((SECONDS - began))s"
}

# go_env [TOOLCHAIN [GOFLAGS]]: the Go settings of every build here (exported): modules, build
# cache and GOPATH in $SPARK_DLQ_CACHE/go, shared by all builds, so a package common to several
# is downloaded and compiled once; GOTOOLCHAIN=TOOLCHAIN and GOFLAGS=GOFLAGS when given (not
# empty), else what the machine's Go has (its go.env, `go env -w`, the environment).
go_env() {
  export GOPATH="$SPARK_DLQ_CACHE/go" GOMODCACHE="$SPARK_DLQ_CACHE/go/pkg/mod"
  export GOCACHE="$SPARK_DLQ_CACHE/go/cache"
  if [[ -n "${1:-}" ]]; then export GOTOOLCHAIN="$1"; fi
  if [[ -n "${2:-}" ]]; then export GOFLAGS="$2"; fi
}

# Maven, quiet and in batch mode, its output on stderr (stdout is the venv path) with no
# terminal colour codes: Maven 3.8's jansi writes resets even with style.color=never.
maven() {
  mvn -q -B -Dstyle.color=never "$@" 2>&1 | sed -u 's/\x1b\[[0-9;]*m//g' >&2
  return "${PIPESTATUS[0]}"
}

# maven_fetch POM OUT [MAVEN ARGUMENTS...]: the runtime dependencies POM declares, from Maven
# Central into the folder OUT, through the cache's own local repository ($SPARK_DLQ_CACHE/m2).
maven_fetch() {
  local pom="$1" out="$2"
  shift 2
  maven -f "$pom" "$@" -Dmaven.repo.local="$SPARK_DLQ_CACHE/m2" \
    dependency:copy-dependencies -DoutputDirectory="$out" -DincludeScope=runtime
}

# need_javac WHAT: stops the set-up, saying so, when there is no javac to build WHAT with.
need_javac() {
  command -v javac >/dev/null || { log "javac not found: $1 needs a JDK 17+ (Debian: openjdk-17-jdk-headless)"; exit 1; }
}

# jar_build SOURCES CLASSPATH LINT JAR: compiles the Java files under SOURCES/src (for Java 17,
# every warning but those LINT turns off an error: -Xlint:all,LINT -Werror) against CLASSPATH into
# JAR; the list of sources compiled is kept beside it (sources.txt). Needs javac (need_javac).
jar_build() {
  local src="$1" classpath="$2" lint="$3" jar="$4"
  local out classes
  out="$(dirname "$jar")"
  classes="$out/classes"
  mkdir -p "$classes"
  (cd "$src" && find src -name '*.java' | LC_ALL=C sort) | sed "s|^|$src/|" > "$out/sources.txt"
  javac --release 17 "-Xlint:all,$lint" -Werror -cp "$classpath" -d "$classes" "@$out/sources.txt" >&2
  jar cf "$jar" -C "$classes" .
  rm -rf "$classes"
}

# cache_key KIND ARGS...: the key of a cached build, from spark_dlq_devtools.cache_keys (the one
# place keys are computed; the test bed's paths module finds the builds with the same functions).
# The system Python runs it: it needs only the standard library.
cache_key() {
  PYTHONPATH="$REPO_ROOT/devtools" python3 -m spark_dlq_devtools.cache_keys "$@"
}
