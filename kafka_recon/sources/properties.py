"""Java .properties files: the apps' client settings and a mirror's mm2.properties."""

from __future__ import annotations

from pathlib import Path

from kafka_recon.errors import ConfigError


def read_properties(path: Path, what: str = "client properties file") -> dict[str, str]:
    """A Java .properties file (key=value or key: value, # and ! comments); `what` names it
    in an error."""
    out: dict[str, str] = {}
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{what} {path}: cannot read it: {exc}") from None
    for n, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith(("#", "!")):
            continue
        sep = min((i for i in (line.find("="), line.find(":")) if i > 0), default=-1)
        if sep < 0:
            raise ConfigError(f"{what} {path}, line {n}: expected key=value, "
                              f"got {line!r}")
        out[line[:sep].strip()] = line[sep + 1:].strip()
    return out
