from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

import pytest

from kafka_recon.errors import UsageError
from kafka_recon.settings import (
    DEFAULT_JVM_OPTIONS,
    SMALL_JIT_WINDOW,
    SMALL_WINDOW_JVM_OPTIONS,
    class_archive_path,
    jvm_options,
)
from kafka_recon.spark.conf import archive_options, driver_conf, spark_conf

pytestmark = pytest.mark.unit

JAVA = ("spark.driver.extraJavaOptions", "spark.executor.extraJavaOptions")


def test_spark_jvms_run_in_utc_with_the_measured_compiler_and_collector_options(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KAFKA_RECON_JVM_OPTIONS", raising=False)
    conf = spark_conf()
    for key in JAVA:
        assert conf[key] == f"-Duser.timezone=UTC {DEFAULT_JVM_OPTIONS}"
    assert conf["spark.sql.session.timeZone"] == "UTC"
    assert "spark.sql.shuffle.partitions" not in conf, "sized by the window, inside the job"


def test_the_clusters_flows_and_connections_spark_settings_win_over_kafka_recons(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from kafka_recon.spark.conf import cluster_defaults

    monkeypatch.delenv("KAFKA_RECON_JVM_OPTIONS", raising=False)
    monkeypatch.setenv("SPARK_CONF_DIR", str(tmp_path))
    (tmp_path / "spark-defaults.conf").write_text(
        "# the cluster's own\nspark.executor.extraJavaOptions  -XX:+UseG1GC\n"
        "spark.ui.showConsoleProgress true\nspark.sql.shuffle.partitions\t64\n")
    cluster = cluster_defaults()
    assert cluster["spark.sql.shuffle.partitions"] == "64"
    conf = spark_conf({"spark.executor.memory": "4g"})
    assert conf["spark.executor.memory"] == "4g"
    # their JVM options, not kafka-recon's tuning; the time zone is added to every JVM
    assert conf["spark.executor.extraJavaOptions"] == "-Duser.timezone=UTC -XX:+UseG1GC"
    assert conf["spark.driver.extraJavaOptions"] == f"-Duser.timezone=UTC {DEFAULT_JVM_OPTIONS}"
    assert "spark.ui.showConsoleProgress" not in conf, "the cluster said; spark-submit reads it"
    given = spark_conf({"spark.driver.extraJavaOptions": "-Xss4m -Duser.timezone=UTC"})
    assert given["spark.driver.extraJavaOptions"] == "-Xss4m -Duser.timezone=UTC"


@pytest.mark.parametrize(("records", "cores", "partitions"), [
    (None, 2, 4), (0, 2, 4), (10_000, 2, 1), (60_000, 2, 3), (100_000, 2, 4),
    (200_000, 32, 8), (1_000_000, 2, 8), (50_000_000, 2, 400),
    (1_000_000, 32, 40), (10**12, 8, 4000)])
def test_shuffle_partitions_follow_the_windows_records_and_the_clusters_cores(
        records: int | None, cores: int, partitions: int) -> None:
    from kafka_recon.spark.conf import shuffle_partitions

    assert shuffle_partitions(records, cores) == partitions


@pytest.mark.parametrize(("given", "options"), [
    ("-XX:+UseG1GC -Xss4m", "-Duser.timezone=UTC -XX:+UseG1GC -Xss4m"),
    ("", "-Duser.timezone=UTC"),  # empty: the JVM's own defaults, the time zone still UTC
    ("  ", "-Duser.timezone=UTC")])
def test_jvm_options_are_replaced_by_the_environment(
        monkeypatch: pytest.MonkeyPatch, given: str, options: str) -> None:
    monkeypatch.setenv("KAFKA_RECON_JVM_OPTIONS", given)
    conf = spark_conf()
    assert [conf[k] for k in JAVA] == [options, options]


def test_a_jvm_option_without_a_dash_is_a_one_line_error_naming_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAFKA_RECON_JVM_OPTIONS", "-XX:+UseParallelGC UseG1GC")
    with pytest.raises(UsageError, match="KAFKA_RECON_JVM_OPTIONS=.*'UseG1GC' is not a JVM "
                                         "option") as err:
        spark_conf()
    assert "\n" not in str(err.value)


def test_the_class_archive_is_among_the_jars_unless_the_environment_names_another_or_none(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("KAFKA_RECON_CLASS_ARCHIVE", raising=False)
    monkeypatch.setenv("KAFKA_RECON_JARS", str(tmp_path))
    assert class_archive_path() == tmp_path / "spark-classes.jsa"
    monkeypatch.setenv("KAFKA_RECON_CLASS_ARCHIVE", str(tmp_path / "other.jsa"))
    assert class_archive_path() == tmp_path / "other.jsa"
    monkeypatch.setenv("KAFKA_RECON_CLASS_ARCHIVE", " ")
    assert class_archive_path() is None


def test_only_the_driver_maps_the_class_archive_and_only_when_it_was_made(
        tmp_path: Path) -> None:
    archive = tmp_path / "a dir" / "spark-classes.jsa"
    assert archive_options(None) == "" and archive_options(archive) == ""  # none, not made
    conf = spark_conf()
    assert driver_conf(conf, "") == conf
    archive.parent.mkdir()
    archive.write_bytes(b"\0")
    options = archive_options(archive)
    # a path with a space stays one option: Spark splits the options as a shell would
    assert shlex.split(options)[0] == f"-XX:SharedArchiveFile={archive}"
    with_archive = driver_conf(conf, options)
    assert with_archive["spark.driver.extraJavaOptions"] == \
        f"{conf['spark.driver.extraJavaOptions']} {options}"
    # an executor elsewhere has other jars on its class path: the archive is the driver's
    assert with_archive["spark.executor.extraJavaOptions"] == \
        conf["spark.executor.extraJavaOptions"]


def test_the_dag_task_hands_its_workers_class_archive_to_the_driver_it_starts(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from kafka_recon.airflow.operators import spark_submit

    op = spark_submit.ReconSparkSubmitOperator(
        task_id="replay_reconcile", step="replay_reconcile", flow="orders", config="unused.yaml",
        conf=spark_conf())
    monkeypatch.setenv("KAFKA_RECON_CLASS_ARCHIVE", str(tmp_path / "spark-classes.jsa"))
    op._class_archive()
    assert op.conf == spark_conf()  # not made on this worker: nothing added
    (tmp_path / "spark-classes.jsa").write_bytes(b"\0")
    op._class_archive()
    assert op.conf["spark.driver.extraJavaOptions"].endswith(
        archive_options(tmp_path / "spark-classes.jsa"))


def test_class_archive_command_with_no_place_to_put_it_is_a_one_line_error(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from kafka_recon.faces.cli import main

    monkeypatch.setenv("KAFKA_RECON_CLASS_ARCHIVE", "")
    assert main(["class-archive"]) == 2
    err = capsys.readouterr().err
    assert err == ("kafka-recon: KAFKA_RECON_CLASS_ARCHIVE is empty (no archive): "
                   "give --out FILE\n")


def test_a_spark_connect_server_is_started_with_a_runs_own_jars_jvm_options_and_archive_on_loopback(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from kafka_recon.spark.server import SERVER_CLASS, server_command

    monkeypatch.delenv("KAFKA_RECON_JVM_OPTIONS", raising=False)
    monkeypatch.setenv("KAFKA_RECON_JARS", str(tmp_path))
    monkeypatch.setenv("KAFKA_RECON_SPARK_JARS", str(tmp_path / "spark"))
    (tmp_path / "spark").mkdir()
    reader, jar = tmp_path / "spark" / "kafka-recon-reader.jar", tmp_path / "spark" / "x.jar"
    for j in (reader, jar):
        j.write_bytes(b"")
    (tmp_path / "spark-classes.jsa").write_bytes(b"")
    argv, env = server_command("local[2]", port=15099)
    assert argv[1:7] == ["--class", SERVER_CLASS, "--name", "kafka-recon spark-server",
                         "--master", "local[2]"]
    assert argv[argv.index("--jars") + 1] == f"{reader},{jar}"
    conf = dict(argv[i + 1].split("=", 1) for i, a in enumerate(argv) if a == "--conf")
    archive = f"-XX:SharedArchiveFile={tmp_path / 'spark-classes.jsa'}"
    assert conf["spark.driver.extraJavaOptions"].startswith(
        f"-Duser.timezone=UTC {DEFAULT_JVM_OPTIONS} {archive}")
    assert conf["spark.executor.extraJavaOptions"] == f"-Duser.timezone=UTC {DEFAULT_JVM_OPTIONS}"
    assert conf["spark.sql.session.timeZone"] == "UTC"
    assert conf["spark.sql.adaptive.enabled"] == "false", "kafka-recon's defaults: a shared server"
    assert conf["spark.connect.grpc.binding.address"] == "127.0.0.1"
    assert conf["spark.connect.grpc.binding.port"] == "15099"
    assert argv[-1] == "spark-internal" and Path(argv[0]).name == "spark-submit"
    assert env["PYSPARK_PYTHON"]


def test_a_session_of_a_server_sets_only_the_sql_settings_the_server_cannot_have_for_it() -> None:
    from kafka_recon.spark.conf import session_conf

    assert session_conf() == {"spark.sql.session.timeZone": "UTC"}


@pytest.mark.parametrize(("given", "env", "where"), [
    ("localhost:15002", None, "--remote"),
    (None, "http://h:15002", "KAFKA_RECON_SPARK_REMOTE"),
    ("sc://", None, "--remote"),
    ("sc://host:port", None, "--remote"),
    ("sc://host:99999/;token=secret", None, "--remote")])
def test_a_spark_connect_url_that_is_not_one_is_a_one_line_error_naming_where_it_came_from(
        monkeypatch: pytest.MonkeyPatch, given: str | None, env: str | None, where: str) -> None:
    from kafka_recon.settings import spark_remote

    if env is None:
        monkeypatch.delenv("KAFKA_RECON_SPARK_REMOTE", raising=False)
    else:
        monkeypatch.setenv("KAFKA_RECON_SPARK_REMOTE", env)
    with pytest.raises(UsageError, match=f"^{where}=.*expected a Spark Connect URL") as err:
        spark_remote(given)
    assert "\n" not in str(err.value) and "secret" not in str(err.value)


def test_the_command_line_server_wins_over_the_environment_and_none_means_a_runs_own_spark(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from kafka_recon.settings import spark_remote

    monkeypatch.setenv("KAFKA_RECON_SPARK_REMOTE", "sc://env:15002")
    assert spark_remote(None) == "sc://env:15002"
    assert spark_remote("sc://cli:15002") == "sc://cli:15002"
    assert spark_remote("sc://cli/;use_ssl=true;token=t") == "sc://cli/;use_ssl=true;token=t"
    monkeypatch.setenv("KAFKA_RECON_SPARK_REMOTE", "  ")
    assert spark_remote(None) is None


def test_a_job_sets_kafka_recons_defaults_and_sizes_the_shuffles_by_the_window(
        spark: object) -> None:
    from pyspark.sql import SparkSession

    from kafka_recon.spark.session import apply_defaults

    assert isinstance(spark, SparkSession)
    cores = spark.sparkContext.defaultParallelism
    apply_defaults(spark, 1_000_000)
    assert spark.conf.get("spark.sql.adaptive.enabled") == "false"
    assert spark.conf.get("spark.sql.shuffle.partitions") == str(max(8, 2 * cores))
    # a replay grows them to its topic's offsets, never shrinks them below a larger tier's
    apply_defaults(spark, 10_000, grow_only=True)
    assert spark.conf.get("spark.sql.shuffle.partitions") == str(max(8, 2 * cores))
    apply_defaults(spark, 2_000_000, grow_only=True)
    assert spark.conf.get("spark.sql.shuffle.partitions") == str(max(16, 2 * cores))
    apply_defaults(spark, None)  # a flow with no upstream count: two per core
    assert spark.conf.get("spark.sql.shuffle.partitions") == str(max(2, 2 * cores))


@pytest.mark.parametrize(("records", "heap"), [
    (0, "768m"), (500_000, "768m"), (500_001, "1g"), (10_000_000, "1g"), (50_000_000, "1g")])
def test_a_runs_driver_heap_is_fixed_and_chosen_by_its_windows_size(
        monkeypatch: pytest.MonkeyPatch, records: int, heap: str) -> None:
    monkeypatch.delenv("KAFKA_RECON_JVM_OPTIONS", raising=False)
    monkeypatch.delenv("SPARK_CONF_DIR", raising=False)
    monkeypatch.delenv("SPARK_HOME", raising=False)
    conf = spark_conf(records=records)
    assert conf["spark.driver.memory"] == heap
    # where the heap starts, as large as it may grow: the collector never resizes it
    own = jvm_options(records)  # which: the test below
    assert conf["spark.driver.extraJavaOptions"] == f"-Duser.timezone=UTC {own} -Xms{heap}"
    assert conf["spark.executor.extraJavaOptions"] == f"-Duser.timezone=UTC {own}"


@pytest.mark.parametrize(("records", "options"), [
    (None, DEFAULT_JVM_OPTIONS), (0, SMALL_WINDOW_JVM_OPTIONS),
    (SMALL_JIT_WINDOW, SMALL_WINDOW_JVM_OPTIONS), (SMALL_JIT_WINDOW + 1, DEFAULT_JVM_OPTIONS),
    (50_000_000, DEFAULT_JVM_OPTIONS)])
def test_a_small_windows_jvms_compile_with_the_jits_first_tier_only_unless_someone_chose(
        monkeypatch: pytest.MonkeyPatch, records: int | None, options: str) -> None:
    monkeypatch.delenv("KAFKA_RECON_JVM_OPTIONS", raising=False)
    monkeypatch.delenv("SPARK_CONF_DIR", raising=False)
    monkeypatch.delenv("SPARK_HOME", raising=False)
    conf = spark_conf(records=records)
    assert conf["spark.executor.extraJavaOptions"] == f"-Duser.timezone=UTC {options}"
    assert ("-XX:TieredStopAtLevel=1" in options) == (records is not None
                                                       and records <= SMALL_JIT_WINDOW)
    monkeypatch.setenv("KAFKA_RECON_JVM_OPTIONS", "-XX:+UseG1GC")  # theirs, whatever the size
    assert spark_conf(records=records)["spark.executor.extraJavaOptions"] == \
        "-Duser.timezone=UTC -XX:+UseG1GC"


def test_a_driver_heap_someone_chose_is_left_alone(monkeypatch: pytest.MonkeyPatch,
                                                   tmp_path: Path) -> None:
    monkeypatch.delenv("KAFKA_RECON_JVM_OPTIONS", raising=False)
    monkeypatch.setenv("SPARK_CONF_DIR", str(tmp_path))
    assert "spark.driver.memory" not in spark_conf(), "a window of unknown size: Spark's own"
    assert spark_conf({"spark.driver.memory": "3g"}, records=10**7)["spark.driver.memory"] == "3g"
    assert "-Xms" not in spark_conf({"spark.driver.memory": "3g"},
                                    records=10**7)["spark.driver.extraJavaOptions"]
    (tmp_path / "spark-defaults.conf").write_text("spark.driver.memory 2g\n")
    assert spark_conf(records=10**7).get("spark.driver.memory") is None, "spark-submit reads it"
    (tmp_path / "spark-defaults.conf").write_text("")
    own = spark_conf({"spark.driver.extraJavaOptions": "-Xms256m"}, records=10**7)
    assert own["spark.driver.memory"] == "1g"
    assert own["spark.driver.extraJavaOptions"] == "-Duser.timezone=UTC -Xms256m"


def test_the_dag_task_sizes_its_drivers_heap_by_what_the_stage_task_counted(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from kafka_recon import orchestrate
    from kafka_recon.airflow.operators import spark_submit
    from kafka_recon.runfiles.stage import Stage, StagedPoint

    monkeypatch.delenv("KAFKA_RECON_JVM_OPTIONS", raising=False)
    monkeypatch.setenv("SPARK_CONF_DIR", str(tmp_path))
    config = tmp_path / "flows.yaml"
    config.write_text("""
flows:
  f:
    owners: [x@example.com]
    record: {id: "$.id", event_time: "$.ts"}
    tiers:
      - name: up
        type: sql
        conn: "sqlite:///u.db"
        ids: "SELECT id, ts AS event_time FROM t WHERE ts >= :start AND ts < :end"
      - {name: topic, type: kafka, bootstrap: "127.0.0.1:9", topic: t}
""")
    window = ["--start", "2026-11-20T00:00:00Z", "--end", "2026-11-21T00:00:00Z"]
    args = ["--config", str(config), "--flow", "f", *window, "--out", str(tmp_path / "run")]
    op = spark_submit.ReconSparkSubmitOperator(
        task_id="replay_reconcile", step="replay_reconcile", flow="f", config=str(config),
        application_args=args)
    monkeypatch.setattr(op, "_connection_conf", dict)
    assert "spark.driver.memory" not in op.submit_conf(), "nothing staged: Spark's own heap"
    run = orchestrate.load("f", window[1], window[3], config, tmp_path / "run")
    run.folder.write(Stage(points=[StagedPoint(name="up", kind="ids", count=2_000_000)]))
    assert op.submit_conf()["spark.driver.memory"] == "1g"
    run.folder.write(Stage(points=[StagedPoint(name="up", kind="ids", count=40_000)]))
    assert op.submit_conf()["spark.driver.memory"] == "768m"


class _StoppedFrame:
    """A cached frame whose Spark has stopped, as after a job that killed its driver."""

    def unpersist(self) -> None:
        raise RuntimeError("Cannot call methods on a stopped SparkContext")


def test_releasing_frames_on_the_way_out_of_a_failed_step_never_hides_its_error(
        spark: Any) -> None:
    from kafka_recon.spark.session import release

    kept = spark.range(3).cache()
    kept.count()
    with pytest.raises(ValueError, match="the step's own"):
        try:
            raise ValueError("the step's own error")
        finally:
            release([_StoppedFrame(), kept])  # type: ignore[list-item]
    assert not kept.is_cached  # the frames after the one that could not be let go, were


def test_a_tiers_records_are_cached_uncompressed_and_every_other_cache_as_the_session_says(
        spark: Any) -> None:
    """The compression is taken when `cache()` is called: the records' cache is plain, the
    next cache (the comparison's, in a run) compressed, and the session's setting unchanged."""
    from pyspark.sql import functions as F

    from kafka_recon.spark import session as ss

    def stored() -> dict[int, int]:
        return {i.id(): i.memSize() for i in spark.sparkContext._jsc.sc().getRDDStorageInfo()}

    key = "spark.sql.inMemoryColumnarStorage.compressed"
    before = spark.conf.get(key, None)
    # a column of few values and one of consecutive numbers: both shrink when compressed
    frame = spark.range(100_000).select("id", (F.col("id") % 3).cast("string").alias("v"))
    earlier = set(stored())  # other tests' caches, in the shared session
    records = ss.cache_records(frame.where("id >= 0"))
    records.count()
    plain = set(stored()) - earlier
    assert spark.conf.get(key, None) == before
    other = frame.where("id >= 1").cache()
    other.count()
    compressed = set(stored()) - plain - earlier
    try:
        sizes = stored()
        assert len(plain) == 1 and len(compressed) == 1
        assert sizes[compressed.pop()] * 2 < sizes[plain.pop()]
    finally:
        ss.release([records, other])
