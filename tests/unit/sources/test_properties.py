"""Java .properties files, as the apps' client settings and a mirror's mm2.properties write
them."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafka_recon.errors import ConfigError
from kafka_recon.sources.properties import read_properties

pytestmark = pytest.mark.unit


def test_both_separators_comments_and_blank_lines_are_read_as_java_reads_them(
        tmp_path: Path) -> None:
    f = tmp_path / "producer.properties"
    f.write_text("# the producer\n! also a comment\n\nacks = all\n"
                 "bootstrap.servers: a:9092,b:9092\nsasl.jaas.config=x=y\n")
    assert read_properties(f) == {"acks": "all", "bootstrap.servers": "a:9092,b:9092",
                                  "sasl.jaas.config": "x=y"}


def test_a_line_without_a_separator_names_the_file_and_the_line(tmp_path: Path) -> None:
    f = tmp_path / "mm2.properties"
    f.write_text("clusters = A, B\nA->B.enabled\n")
    with pytest.raises(ConfigError, match=r"mirror file .*mm2.properties, line 2: expected "
                                          r"key=value, got 'A->B.enabled'"):
        read_properties(f, "mirror file")


def test_a_file_that_cannot_be_read_is_one_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="client properties file .*gone.properties: cannot "
                                          "read it"):
        read_properties(tmp_path / "gone.properties")
