"""The engine's image, built by ``scripts/setup/images.sh``, routes messages as a driver pod.

The container is started the way Spark starts a SparkApplication's driver pod: the image's
entry point with the ``driver`` role, ``spark-submit`` of the rendered SparkApplication's
``mainApplicationFile`` and ``arguments`` (``dlq-engine run -f`` on the policy), with the
operator's ConfigMap mounted where the SparkApplication mounts it and a processor added where a
team's image copies its processors. Only the master (``local[1]`` for Kubernetes: no executor
pods here) and ``--once`` differ. The container runs as the image's own numeric user (the
rendered pods set ``runAsNonRoot`` and no user) with every capability dropped and no privilege
escalation, as the rendered security context asks. Spark in the image, the Kafka connector and
the engine's jar baked into it route to the test bed's broker.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from dlq_engine.model import parse_policy
from spark_dlq_devtools import containers
from spark_dlq_devtools.paths import REPO_ROOT
from spark_dlq_operator import naming, render
from spark_dlq_operator.config import OperatorConfig
from tests.conftest import unique
from tests.helpers import engine_policy, non_root_uid, produce, read_all

PROCESSORS = "/opt/spark-dlq/processors"


def test_engine_image_routes_as_the_driver_pod_runs_it(
    topics: Callable[..., dict[str, str]], bootstrap_servers: str, tmp_path: Path
) -> None:
    names = topics(partitions=2)
    produce(
        bootstrap_servers,
        names["source"],
        [(b"k1", b"ok:first"), (b"k2", b"terminate:bad"), (b"k3", b"nonretry:x"), (b"k4", b"ok:second")],
    )
    document = engine_policy(
        names,
        bootstrap_servers,
        retry={"nonRetryableErrors": ["LookupError"]},
        spark={"checkpointLocation": "/tmp/checkpoint"},
    )
    policy = parse_policy(document)
    image_name = containers.image("engine")
    config = OperatorConfig(spark_image=image_name)
    owner = naming.Owner(policy.name, policy.namespace, "uid")
    config_map = render.config_map(policy, config=config, owner=owner)
    app = render.spark_application(policy, config=config, owner=owner)["spec"]
    assert app["image"] == image_name
    policy_dir = tmp_path / "policy"
    policy_dir.mkdir()
    for key, text in config_map["data"].items():
        (policy_dir / key).write_text(text)
    # What Spark's driver pod gets from the SparkApplication's pod template.
    [driver] = app["driver"]["template"]["spec"]["containers"]
    [policy_mount] = [m for m in driver["volumeMounts"] if m["name"] == "policy"]

    security = driver["securityContext"]
    assert security["runAsNonRoot"] is True
    assert "runAsUser" not in security
    assert security["capabilities"] == {"drop": ["ALL"]}
    assert security["allowPrivilegeEscalation"] is False
    assert non_root_uid(containers.configured_user(image_name))

    spark_conf = [arg for key, value in app["sparkConf"].items() for arg in ("--conf", f"{key}={value}")]
    name = unique("engine-image")
    argv = containers.run_argv(
        name,
        image_name=image_name,
        command=[
            *("driver", "--master", "local[1]", *spark_conf),
            *(app["mainApplicationFile"], *app["arguments"], "--once"),
        ],
        volumes={
            policy_dir: policy_mount["mountPath"],
            # The processor's package, where a team's image copies its processors.
            REPO_ROOT / "tests" / "__init__.py": f"{PROCESSORS}/tests/__init__.py",
            REPO_ROOT / "tests" / "processors": f"{PROCESSORS}/tests/processors",
        },
        # What the driver pod's environment gives the entry point (its own address).
        environment={"SPARK_DRIVER_BIND_ADDRESS": "127.0.0.1"},
    )
    finished = containers.run_once(name, argv, timeout=420)
    assert finished.returncode == 0, finished.stderr[-4000:]
    assert "dlq-engine:" in finished.stdout, finished.stdout[-2000:]

    outputs = read_all(bootstrap_servers, names["output"], expect=2, timeout=30)
    assert sorted(r.value for r in outputs) == [b"FIRST", b"SECOND"]
    dead = read_all(bootstrap_servers, names["dlq"], expect=2, timeout=30)
    assert sorted((r.key, r.header("dlq.reason")) for r in dead) == [
        (b"k2", "terminated"),
        (b"k3", "non-retryable"),
    ]


def test_engine_image_holds_what_the_spark_application_names() -> None:
    """The entry file the SparkApplication names, Python 3.11 and Java 17 for the user the pods
    run as, the engine importable by the interpreter spark-submit hands the driver to, and a
    class-data-sharing archive the JVM maps (``-Xshare:on`` refuses to start otherwise) for the
    class paths the driver and the executors get: the operator's class path jar first, then the
    driver's mounted configuration (not empty) or the executor's work dir, then Spark's jars in
    whatever order the node's file system lists them (here: backwards)."""
    main_file = render.MAIN_APPLICATION_FILE.removeprefix("local://")
    first = render.CLASS_PATH_JAR
    jars = "$(ls /opt/spark/jars/*.jar | sort -r | tr '\\n' :)"
    share = "java -Xshare:on -Xlog:cds=off -Xlog:cds+dynamic=off -cp"
    finished = containers.podman(
        "run", "--rm", "--cap-drop", "ALL", "--security-opt", "no-new-privileges",
        containers.image("engine"), "sh", "-c",
        f'id -u; test -f {main_file} && echo main; "$PYSPARK_PYTHON" -c "import dlq_engine, pyspark;'
        ' import sys; print(sys.version.split()[0], pyspark.__version__)";'
        " java -version 2>&1 | grep -v '^NOTE: Picked up' | head -1;"
        " mkdir -p /tmp/conf && echo spark.master=k8s://x > /tmp/conf/spark.properties;"
        f' {share} "{first}:/tmp/conf/:$(ls /opt/spark/jars/slf4j-api-*.jar):{jars}" -version 2>/dev/null && echo driver;'
        f' {share} "/opt/spark/conf:{first}:{jars}/opt/spark/work-dir" -version 2>/dev/null && echo executor',
        timeout=120,
    )  # fmt: skip
    uid, main, python, java, *mapped = finished.stdout.split("\n")[:6]
    assert mapped == ["driver", "executor"], f"the image's archive is not mapped: {finished.stdout}"
    assert uid == containers.configured_user(containers.image("engine"))
    assert main == "main"
    python_version, spark_version = python.split()
    assert python_version.startswith("3.11.")
    assert spark_version == OperatorConfig().spark_version
    assert '"17.' in java
