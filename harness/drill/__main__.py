"""`make drill`: every loss scenario made to happen on a real cluster, then found.

    python -m harness.drill [--scenario S1 ...] [--repeat N] [--secured] [--docs DIR]

The drill proves the product and ships with the repository, not with the package: its command
lives here, beside what it drives, and the product's command line knows nothing of it. Exits 0
when every row passes, 1 when one does not, 2 (one line) on a bad command line.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from harness.drill.matrix import default_docs, run_drill

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def parser() -> argparse.ArgumentParser:
    d = argparse.ArgumentParser(prog="python -m harness.drill", description=(
        "make every loss scenario happen on a real cluster and check the reconciliation "
        "finds it"))
    d.add_argument("--scenario", nargs="+",
                   help="scenario ids (default: every one, S1-S25, C1-C5 and Q1)")
    d.add_argument("--repeat", type=int, default=5, help="runs of each negative control "
                   "(S11, S12), default 5")
    d.add_argument("--attempts", type=int, default=3, help="re-runs of a scenario whose fault "
                   "did not bite, default 3")
    d.add_argument("--out", type=Path, default=Path("drill-out"), help="work folder (replaced)")
    d.add_argument("--docs", type=Path, help="where drill.md and drill.json go (default: docs/ "
                   "for the whole drill, the work folder for a --scenario subset)")
    d.add_argument("--no-docs", action="store_true", help="print the matrix only")
    d.add_argument("--secured", action="store_true",
                   help="a secured cluster (SASL_SSL, mTLS, ACLs) read over SASL_SSL; writes "
                        "drill-secured.md")
    return d


def drill_docs(a: argparse.Namespace, published: Path) -> Path | None:
    """Where the drill's matrix goes: `--docs`, else the published folder for the whole drill;
    a subset of scenarios writes into its work folder, so that trying one scenario never
    replaces the published matrix with a partial one."""
    if a.no_docs:
        return None
    if a.docs is not None:
        return Path(a.docs)
    return Path(a.out) if a.scenario else published


def main(argv: list[str] | None = None) -> int:
    a = parser().parse_args(argv)
    if a.repeat < 1 or a.attempts < 1:
        print("drill: --repeat and --attempts must be at least 1", file=sys.stderr)
        return EXIT_USAGE
    try:
        rows = run_drill(a.scenario, a.out, repeat=a.repeat, attempts=a.attempts,
                         docs=drill_docs(a, default_docs()), secured=a.secured)
    except ValueError as exc:  # an unknown scenario id
        print(f"drill: {exc}", file=sys.stderr)
        return EXIT_USAGE
    return EXIT_OK if all(r["result"] == "pass" for r in rows) else EXIT_FAILED


if __name__ == "__main__":
    raise SystemExit(main())
