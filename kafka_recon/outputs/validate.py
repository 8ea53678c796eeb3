"""Step 4: validate a reconciliation's counts with the Great Expectations suites in expectations/.

great_expectations and pandas are imported inside the function: DAG files import this module's
callers at parse time and must stay light.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from kafka_recon.config import Tolerance, ToleranceKind
from kafka_recon.result.model import Hop, Result
from kafka_recon.runfiles.bands import Bands
from kafka_recon.runfiles.outcomes import FailedExpectation, SuiteOutcome, Validation, Volume
from kafka_recon.runfolder import RunFolder, put_tree, remove
from kafka_recon.settings import expectations_dir


def validate_result(result: Result, folder: RunFolder,
                    tolerance: Tolerance, volume: Volume | None = None,
                    hop_tolerance: dict[str, Tolerance] | None = None,
                    bands: Bands | None = None) -> Validation:
    """Run the suites over `result` and build Data Docs in the run folder's `gx`.

    `tolerance` is the flow's; `hop_tolerance` a hop's own, by hop name (a mirror's copies).
    Each hop's allowed records of each kind are the same numbers the verdict used
    (`Tolerance.allowed`: a count, or a percentage of the hop's expected records).
    Each topic's replays are checked apart (`recon_replays`, or `recon_replays[<tier>]` when
    the flow has several topics): two topics of a chain rightly hold different records.

    `volume` is the band from the history (kafka_recon.outputs.history.volume_band) for a flow
    with no upstream count; without a band (too little history) the volume suite is not run and the
    summary says why.
    Returns the outcome (validation.json): each suite's success and failed expectations, where
    the Data Docs are, and the volume band it checked.
    """
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
    remove(folder.gx)  # re-running a window replaces its validation
    # GX writes only to a disk: in an object store's run folder, it works in a temporary
    # folder whose files are then written to the run folder
    scratch = None if folder.local else Path(tempfile.mkdtemp(prefix="kafka-recon-gx-"))
    run_ctx = Path(str(folder.gx)) if scratch is None else scratch / "gx"
    try:
        validation = _validate(result, run_ctx, tolerance, volume, hop_tolerance, bands)
        if scratch is not None:
            put_tree(run_ctx, folder.gx)
    finally:
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)
    docs = folder.gx / "uncommitted" / "data_docs" / "local_site" / "index.html"
    return validation.model_copy(update={"data_docs": str(docs)})


def _validate(result: Result, run_ctx: Path, tolerance: Tolerance, volume: Volume | None,
              hop_tolerance: dict[str, Tolerance] | None, bands: Bands | None = None
              ) -> Validation:
    """The suites over `result`, in the GX file context `run_ctx` (Data Docs built there)."""
    import great_expectations as gx
    import pandas as pd

    shutil.copytree(expectations_dir(), run_ctx)
    # a file context is the folder `gx` under its project root
    context = gx.get_context(mode="file", project_root_dir=str(run_ctx.parent))

    def allowed(hop: Hop, kind: ToleranceKind) -> int:
        return (hop_tolerance or {}).get(hop.name, tolerance).allowed(kind, hop.expected)

    hops = pd.DataFrame(
        [
            {"hop": h.name, "expected": h.expected, "observed": h.observed,
             "missing": h.missing, "unexpected": h.unexpected, "duplicate": h.duplicate,
             "expected_plus_unexpected": (h.expected or 0) + h.unexpected,
             "allowed_missing": allowed(h, "loss"),
             "allowed_duplicate": allowed(h, "duplicate"),
             "allowed_unexpected": allowed(h, "unexpected"),
             # routed to a sink connector's dead-letter queue (0 on every other hop)
             "dead_lettered": h.dead_lettered or 0,
             "allowed_dead_lettered": allowed(h, "dead_lettered")}
            for h in result.hops
        ]
    )
    params: dict[str, Any] = {}
    checks: list[tuple[str, Any, str]] = [("recon_hops", hops, "recon_hops")]
    topics = list(dict.fromkeys(r.tier for r in result.replays))
    for tier in topics:
        checks.append(("recon_replays", pd.DataFrame(
            [{"group": r.group, "count": r.count, "fingerprint": r.fingerprint}
             for r in result.replays if r.tier == tier]),
            f"recon_replays[{tier}]" if len(topics) > 1 else "recon_replays"))
    if volume is not None:
        counts = {t.name: t.count for t in result.tiers}
        volume = volume.model_copy(update={"observed": counts.get(volume.tier)})
        if volume.min is not None:
            params.update(volume_min=volume.min, volume_max=volume.max)
            checks.append(("recon_volume", pd.DataFrame(
                [{"tier": volume.tier, "records": volume.observed}]), "recon_volume"))
    if bands is not None and bands.check != "off" and bands.bands:
        checks.append(("recon_bands", _band_expectations(context, result, bands), "recon_bands"))
    suites: dict[str, SuiteOutcome] = {}
    for name, frame, label in checks:
        vd = context.validation_definitions.get(name)
        res = vd.run(batch_parameters={"dataframe": frame}, expectation_parameters=params)
        failed = []
        for r in res.results:
            if r.success or r.expectation_config is None:
                continue
            kwargs = {k: _plain(v) for k, v in r.expectation_config.kwargs.items()
                      if k != "batch_id"}
            kind = r.expectation_config.type
            failed.append(FailedExpectation(
                expectation=kind, kwargs=kwargs, observed=_plain(r.result.get("observed_value")),
                words=failure_words(name, kind, kwargs, frame.to_dict("records"), params,
                                    label.partition("[")[2].rstrip("]"))))
        suites[label] = SuiteOutcome(success=bool(res.success), failed=failed)
    context.build_data_docs()
    # with volume.check warn, a bucket out of its band is reported and fails nothing
    counted = {k: s for k, s in suites.items()
               if not (k == "recon_bands" and bands is not None and bands.check == "warn")}
    return Validation(success=all(s.success for s in counted.values()), suites=suites,
                      volume=volume)


# GX runs an expectation at a time: one per bucket took minutes for a day of 5-minute buckets
# of four tiers (1,152), so every bucket is checked by two column pairs, and only the
# buckets out of their bands, at most this many, get an expectation of their own
BAND_EXPECTATIONS = 48


def _band_expectations(context: Any, result: Result, bands: Bands) -> Any:
    """The run's copy of the `recon_bands` suite filled, and the rows it checks as a frame
    (tier, bucket, records, low, high): every bucket's count between the band its history
    expects (two column pairs over all rows), and each bucket out of its band (the first
    BAND_EXPECTATIONS) as an expectation of its own, its bounds as kwargs and the history it
    came from in its meta, so Data Docs show the range beside the count."""
    import great_expectations as gx
    import pandas as pd
    from great_expectations.expectations.metadata_types import FailureSeverity

    severity = FailureSeverity.WARNING if bands.check == "warn" else FailureSeverity.CRITICAL
    counts = {t.name: t.buckets for t in result.tiers}
    rows: list[dict[str, Any]] = [
        {"tier": b.tier, "bucket": b.bucket, "records": counts.get(b.tier, {}).get(b.bucket, 0),
         "low": b.low, "high": b.high} for b in bands.bands]
    suite = context.suites.get("recon_bands")
    for above, below in (("records", "low"), ("high", "records")):
        suite.add_expectation(gx.expectations.ExpectColumnPairValuesAToBeGreaterThanB(
            column_A=above, column_B=below, or_equal=True, severity=severity,
            meta={"history": "each bucket's band: the same slot of the trusted windows of "
                             "the trailing days (bands.json)"}))
    outside = [(b, r) for b, r in zip(bands.bands, rows, strict=True)
               if not b.low <= r["records"] <= b.high]
    for b, _ in outside[:BAND_EXPECTATIONS]:
        suite.add_expectation(gx.expectations.ExpectColumnValuesToBeBetween(
            column="records", min_value=b.low, max_value=b.high,
            row_condition=f'tier=="{b.tier}" and bucket=="{b.bucket}"',
            condition_parser="pandas", severity=severity,
            meta={"tier": b.tier, "bucket": b.bucket, "history": b.basis,
                  "references": b.references, "median": b.median}))
    suite.save()
    return pd.DataFrame(rows)


# what each pair of the hops suite checks, as a sentence of one failing hop's row
PAIR_WORDS = {
    ("allowed_missing", "missing"): "{missing} records missing, {allowed_missing} allowed",
    ("allowed_duplicate", "duplicate"): "{duplicate} duplicate records, {allowed_duplicate} "
                                        "allowed",
    ("allowed_unexpected", "unexpected"): "{unexpected} unexpected records, "
                                          "{allowed_unexpected} allowed",
    ("allowed_dead_lettered", "dead_lettered"): "{dead_lettered} records dead-lettered, "
                                                "{allowed_dead_lettered} allowed",
    ("expected_plus_unexpected", "observed"): "{observed} records observed, more than the "
                                              "{expected} expected and {unexpected} unexpected "
                                              "together",
}


def failure_words(suite: str, kind: str, kwargs: dict[str, Any], rows: list[dict[str, Any]],
                  params: dict[str, Any], tier: str = "") -> str:
    """A failed expectation as an owner reads it: which hop or tier, what was seen and what
    was allowed, from the rows the suite checked (GX's own observed value is None for a
    column pair)."""
    def num(v: Any) -> Any:
        return _plain(v)

    if suite == "recon_hops":
        pair = (kwargs.get("column_A"), kwargs.get("column_B"))
        if pair in PAIR_WORDS:
            a, b = pair
            bad = [r for r in rows if not num(r[a]) >= num(r[b])]
            return "; ".join(f"{r['hop']}: " + PAIR_WORDS[pair].format(
                **{k: num(v) for k, v in r.items()}) for r in bad)
        column = kwargs.get("column")
        if column in ("missing", "unexpected", "duplicate"):
            bad = [r for r in rows if num(r[column]) < 0]
            return "; ".join(f"{r['hop']}: a negative count of {column} records "
                             f"({num(r[column])})" for r in bad)
    if suite == "recon_replays":
        of = f" of {tier}" if tier else ""
        if kwargs.get("column") == "fingerprint":
            return (f"the {len(rows)} replays{of} read different ids "
                    f"({len({r['fingerprint'] for r in rows})} different fingerprints)")
        if kwargs.get("column") == "count":
            return (f"the {len(rows)} replays{of} read different counts: "
                    + ", ".join(str(num(r["count"])) for r in rows))
    if suite == "recon_bands" and kwargs.get("column_A"):
        low = kwargs.get("column_B") == "low"
        bad = [r for r in rows if (num(r["records"]) < num(r["low"]) if low
                                   else num(r["records"]) > num(r["high"]))]
        return f"{len(bad)} bucket(s) with {'fewer' if low else 'more'} records than their " \
               "bands: " + "; ".join(f"{r['tier']} {r['bucket']}: {num(r['records'])}, "
                                     f"expected {num(r['low'])}-{num(r['high'])}"
                                     for r in bad[:5]) + ("; ..." if len(bad) > 5 else "")
    if suite == "recon_bands":
        cond = str(kwargs.get("row_condition") or "")
        row = next((r for r in rows if f'tier=="{r["tier"]}" and bucket=="{r["bucket"]}"'
                    in cond), None)
        if row is not None:
            return (f"{row['tier']}: {num(row['records'])} records in the bucket of "
                    f"{row['bucket']}, expected between {kwargs.get('min_value')} and "
                    f"{kwargs.get('max_value')}")
    if suite == "recon_volume" and rows:
        r = rows[0]
        return (f"{r['tier']}: {num(r['records'])} records, expected between "
                f"{params.get('volume_min')} and {params.get('volume_max')}")
    return FailedExpectation(expectation=kind, kwargs=kwargs).said


def _plain(value: Any) -> Any:
    """numpy scalars to plain Python, so the summary is JSON."""
    return value.item() if hasattr(value, "item") else value
