from __future__ import annotations

import pytest

from kafka_recon.errors import UsageError
from kafka_recon.settings import DEFAULT_JVM_OPTIONS
from kafka_recon.spark.session import spark_conf

pytestmark = pytest.mark.unit

JAVA = ("spark.driver.extraJavaOptions", "spark.executor.extraJavaOptions")


def test_spark_jvms_run_in_utc_with_the_measured_compiler_and_collector_options(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KAFKA_RECON_JVM_OPTIONS", raising=False)
    conf = spark_conf()
    for key in JAVA:
        assert conf[key] == f"-Duser.timezone=UTC {DEFAULT_JVM_OPTIONS}"
    assert conf["spark.sql.session.timeZone"] == "UTC"
    assert conf["spark.sql.shuffle.partitions"] == "8"


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
