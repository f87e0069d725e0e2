# Podman settings of spark-dlq, sourced by the scripts that build or run images (never run).
# Everything podman keeps goes under $SPARK_DLQ_CACHE/podman (image storage) and
# /run/spark-dlq-podman (run-time state), so the project neither reads nor changes the
# machine's own podman settings:
#   - runtime runc: Debian's crun refuses to start containers under cgroup v1 "hybrid";
#   - explicit ulimits: podman's default ones cannot be set inside this kind of machine;
#   - no registry is searched for short names (none is reachable; a missing base fails at once).
podman_dir="$SPARK_DLQ_CACHE/podman"
mkdir -p "$podman_dir/storage" /run/spark-dlq-podman
cat > "$podman_dir/containers.conf" <<CONF
[containers]
default_ulimits = ["nofile=4096:4096", "nproc=4096:4096"]
[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
events_logfile_path = "$podman_dir/events.log"
CONF
cat > "$podman_dir/storage.conf" <<CONF
[storage]
driver = "overlay"
graphroot = "$podman_dir/storage"
runroot = "/run/spark-dlq-podman"
CONF
cat > "$podman_dir/registries.conf" <<CONF
unqualified-search-registries = []
short-name-mode = "disabled"
CONF
export CONTAINERS_CONF="$podman_dir/containers.conf"
export CONTAINERS_STORAGE_CONF="$podman_dir/storage.conf"
export CONTAINERS_REGISTRIES_CONF="$podman_dir/registries.conf"
