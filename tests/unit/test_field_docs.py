"""A model field's docstring is its description in the docs and schemas (harness.docs), read
from the source when documents are made, never when the models are imported: every Airflow
task imports them, and reading their source took a quarter of its DAG file's parse."""

from __future__ import annotations

import subprocess
import sys

import pytest
from pydantic import BaseModel, Field

from harness.docs import attribute_docs, described
from kafka_recon.settings import REPO_ROOT

pytestmark = pytest.mark.unit


class _Base(BaseModel):
    kept: int = 0
    """Said by the base."""
    redeclared: int = 0
    """Said by the base, then declared again."""


class _Model(_Base):
    redeclared: int = 1
    own: str = ""
    """First line.

        Indented second paragraph."""
    given: int = Field(0, description="Given explicitly.")
    """Not this one."""
    bare: int = 0


def test_a_fields_docstring_is_found_in_the_model_or_the_model_it_extends() -> None:
    docs = attribute_docs(_Model)
    assert docs["kept"] == "Said by the base."
    assert docs["own"] == "First line.\n\nIndented second paragraph."
    assert "redeclared" not in docs and "bare" not in docs  # as pydantic would say nothing
    fields = _Model.model_fields
    assert described(_Model, "given", fields["given"]) == "Given explicitly."
    assert described(_Model, "bare", fields["bare"]) is None


def test_the_published_schemas_carry_the_fields_docstrings() -> None:
    from harness.docs import schemas

    text = schemas()["schemas/result.schema.json"]
    from kafka_recon.result.model import Result

    first = next(n for n in Result.model_fields if attribute_docs(Result).get(n))
    assert attribute_docs(Result)[first].splitlines()[0].replace('"', '\\"') in text


def test_importing_the_models_reads_no_source() -> None:
    probe = ("import linecache, kafka_recon.config as c, kafka_recon.result.model as m, "
             "kafka_recon.runfiles.stage as s; "
             "print(sorted(f for f in (c.__file__, m.__file__, s.__file__) "
             "if f in linecache.cache))")
    out = subprocess.run([sys.executable, "-c", probe], cwd=REPO_ROOT, capture_output=True,
                         text=True, timeout=120, check=True)
    assert out.stdout.strip() == "[]", out.stdout
