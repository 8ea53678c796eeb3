"""The base of every run file: strict fields, a schema version, one-line errors.

A file carries `schema_version`. A reader upgrades what an older kafka-recon wrote (`upgrade`,
one step per version; version 0 is a file written before versions were kept) and refuses, in
one line naming the file, what a newer one wrote or what it cannot upgrade: an answer is never
read from a shape it does not know.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, ClassVar, Literal, Self

from pydantic import BaseModel, ConfigDict, ValidationError
from upath import UPath

from kafka_recon.errors import ResultError

# the sides of docs/design.md: where along the flow a record was lost, duplicated or written
Side = Literal["write", "consume", "replication", "process"]


class Part(BaseModel):
    """A piece of a run file: unknown fields are refused, a typo never passes silently."""

    # a field's docstring is its description in the published schemas and docs/reference;
    # harness.docs reads it from the source (pydantic's use_attribute_docstrings would read
    # every model's source at import, in every Airflow task)
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    def as_json(self) -> dict[str, Any]:
        return self.model_dump(by_alias=True, mode="json")


class RunFile(Part):
    """A whole run file. `FILE` is the key `RunFolder` names it by; `SCHEMA_VERSION` the
    version this kafka-recon writes."""

    FILE: ClassVar[str]
    SCHEMA_VERSION: ClassVar[int] = 2
    # the version that added `run`: the one before it reads as written by no known run
    RUN_SINCE: ClassVar[int] = 2
    # the field that holds what a version 0 file held as a bare list, when it was one
    LISTED_AS: ClassVar[str | None] = None
    schema_version: int = 2
    run: str | None = None
    """The run that wrote this file: `<dag_id>/<run_id>` under Airflow, `process <pid> on
    <host>` from the command line (the holder of the window's lease). Every file of a run
    folder names the same run as its `result.json`, except a repair's, which names the repair's
    run; none when written outside a run (or by a kafka-recon before runs were named)."""

    @classmethod
    def upgrade(cls, data: Any, version: int) -> Any:
        """`data` as written at `version`, one version later. Version 0 to 1 only adds the
        version; a file that was a bare list is wrapped in its `LISTED_AS` field. The version
        before `RUN_SINCE` only lacks `run`."""
        if version == 0 and isinstance(data, list) and cls.LISTED_AS:
            return {cls.LISTED_AS: data}
        if version in (0, cls.RUN_SINCE - 1) and isinstance(data, dict):
            return data
        raise ValueError(f"no upgrade from schema version {version}")

    @classmethod
    def upgraded(cls, data: Any) -> Any:
        """A file's JSON as this version reads it: upgraded one version at a time from the
        version it carries (none: version 0); refused when a newer kafka-recon wrote it."""
        version = data.get("schema_version", 0) if isinstance(data, dict) else 0
        if not isinstance(version, int) or version < 0:
            raise ValueError(f"schema_version {version!r} is not a version")
        if version > cls.SCHEMA_VERSION:
            raise ValueError(f"schema version {version} was written by a newer kafka-recon "
                             f"(this one reads up to {cls.SCHEMA_VERSION})")
        while version < cls.SCHEMA_VERSION:
            data = cls.upgrade(data, version)
            version += 1
            data = {**data, "schema_version": version}
        return data

    @classmethod
    def parse(cls, data: Any, where: str) -> Self:
        """The model of `data`, or a ResultError naming `where` and the field."""
        try:
            return cls.model_validate(cls.upgraded(data))
        except ValueError as exc:
            if not isinstance(exc, ValidationError):
                raise ResultError(f"{where}: {exc}") from None
            err = exc.errors()[0]  # one line: the first field that is wrong
            loc = ".".join(str(p) for p in err["loc"])
            msg = str(err["msg"]).removeprefix("Value error, ")
            raise ResultError(f"{where}: field '{loc}': {msg}" if loc else f"{where}: {msg}"
                              ) from None

    @classmethod
    def load(cls, path: Path | UPath | str) -> Self:
        """`path`: a local path or an object store's (a `UPath`)."""
        if not isinstance(path, (Path, UPath)):
            path = Path(path)
        try:
            data = json.loads(path.read_text())
        except ValueError as exc:
            raise ResultError(f"{path}: cannot read it: {exc}") from None
        except OSError as exc:
            if not isinstance(path, Path) and not isinstance(exc, FileNotFoundError):
                raise  # an object store that did not answer is not an unreadable file
            raise ResultError(f"{path}: cannot read it: {exc}") from None
        return cls.parse(data, str(path))

    def dumps(self) -> str:
        return json.dumps(self.as_json(), indent=2, default=str)
