#!/usr/bin/env bash
# Entry point of spark-dlq's Spark base image (scripts/images/bases/spark.Containerfile).
#
# Spark's Kubernetes scheduler backend starts the containers of the image it is given with a
# role as the first argument:
#   driver <spark-submit arguments>   the driver pod (the spark-operator or spark-submit made it
#                                     with --deploy-mode cluster; inside the pod it runs in client
#                                     mode, bound to the pod's address, SPARK_DRIVER_BIND_ADDRESS)
#   executor                          an executor pod; everything it needs is in SPARK_* variables
#                                     (the driver's URL, its id, cores, memory, the application id,
#                                     the pod's address and name, the resource profile) and its
#                                     JVM options in SPARK_JAVA_OPT_0, SPARK_JAVA_OPT_1, ...
# Both run under tini, which forwards the pod's SIGTERM to Spark and reaps the Python workers
# Spark leaves behind. Anything else is run as given, so `podman run IMAGE java -version` works.
set -euo pipefail

: "${SPARK_HOME:=/opt/spark}"
: "${JAVA_HOME:=/usr/lib/jvm/java-17-openjdk-amd64}"

# The executor's class path: the configuration directories first (Spark mounts its
# configuration at SPARK_CONF_DIR), then Spark's jars, anything the pod adds, and the work
# dir (where spark.files land, as Spark's own images put it last).
classpath() {
  local path="${SPARK_CLASSPATH:+$SPARK_CLASSPATH:}$SPARK_HOME/jars/*"
  path+="${SPARK_EXTRA_CLASSPATH:+:$SPARK_EXTRA_CLASSPATH}"
  path+="${SPARK_DIST_CLASSPATH:+:$SPARK_DIST_CLASSPATH}"
  path="${SPARK_CONF_DIR:-$SPARK_HOME/conf}:$path"
  if [[ -n "${HADOOP_CONF_DIR:-}" ]]; then path="$HADOOP_CONF_DIR:$path"; fi
  printf '%s:%s' "$path" "$PWD"
}

# SPARK_JAVA_OPT_<n> in numeric order (the executor's spark.executor.extraJavaOptions and the
# settings Spark passes to every executor JVM).
java_options=()
while IFS= read -r name; do
  java_options+=("${!name}")
done < <(compgen -e | grep -E '^SPARK_JAVA_OPT_[0-9]+$' | sort -t_ -k4 -n || true)

case "${1:-}" in
  driver)
    shift
    exec tini -s -- "$SPARK_HOME/bin/spark-submit" \
      --conf "spark.driver.bindAddress=${SPARK_DRIVER_BIND_ADDRESS:?the driver pod sets SPARK_DRIVER_BIND_ADDRESS}" \
      --conf "spark.executorEnv.SPARK_DRIVER_POD_IP=${SPARK_DRIVER_BIND_ADDRESS}" \
      --deploy-mode client \
      "$@"
    ;;
  executor)
    shift
    exec tini -s -- "$JAVA_HOME/bin/java" "${java_options[@]}" \
      -Xms"${SPARK_EXECUTOR_MEMORY:?the executor pod sets SPARK_EXECUTOR_MEMORY}" \
      -Xmx"${SPARK_EXECUTOR_MEMORY}" \
      -cp "$(classpath)" \
      org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend \
      --driver-url "${SPARK_DRIVER_URL:?the executor pod sets SPARK_DRIVER_URL}" \
      --executor-id "${SPARK_EXECUTOR_ID:?the executor pod sets SPARK_EXECUTOR_ID}" \
      --bind-address "${SPARK_EXECUTOR_POD_IP:?the executor pod sets SPARK_EXECUTOR_POD_IP}" \
      --hostname "${SPARK_EXECUTOR_POD_IP}" \
      --cores "${SPARK_EXECUTOR_CORES:?the executor pod sets SPARK_EXECUTOR_CORES}" \
      --app-id "${SPARK_APPLICATION_ID:?the executor pod sets SPARK_APPLICATION_ID}" \
      --resourceProfileId "${SPARK_RESOURCE_PROFILE_ID:-0}" \
      --podName "${SPARK_EXECUTOR_POD_NAME:?the executor pod sets SPARK_EXECUTOR_POD_NAME}" \
      "$@"
    ;;
  *)
    exec "$@"
    ;;
esac
