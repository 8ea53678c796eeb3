"""Where the project's files and JVM parts live, so every entry point agrees."""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]


class MissingJarsError(RuntimeError):
    """The Maven-resolved jars are not where they should be."""


def jars_dir() -> Path:
    return Path(os.environ.get("KAFKA_RECON_JARS", REPO_ROOT / ".jars"))


def _jar_list(kind: str) -> list[Path]:
    folder = jars_dir() / kind
    jars = sorted(folder.glob("*.jar"))
    if not jars:
        raise MissingJarsError(
            f"no jars in {folder}: run `make jars` (Maven resolves them from Maven Central "
            f"through jvm/pom.xml, profile '{kind}')"
        )
    return jars


def kafka_classpath() -> str:
    """Classpath of the Kafka broker and its tools."""
    return os.pathsep.join(str(j) for j in _jar_list("kafka"))


def spark_jars() -> list[str]:
    """Local jars for Spark: the Kafka connector and the JDBC drivers (never --packages)."""
    return [str(j) for j in _jar_list("spark")]


def flume_classpath() -> str:
    """Classpath of the Apache Flume agent (the drill's S10)."""
    return os.pathsep.join(str(j) for j in _jar_list("flume"))
