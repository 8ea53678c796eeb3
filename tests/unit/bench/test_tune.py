"""bench.tune's variants: what each run changes."""

from __future__ import annotations

import pytest

from bench import tune

pytestmark = pytest.mark.unit


def test_two_variants_joined_by_a_plus_change_both_what_each_changes() -> None:
    both = tune.variant("records_compressed+eventlog")
    assert both["consts"] == {"kafka_recon.spark.session.RECORDS_COMPRESSED": True}
    assert both["spark"]["spark.eventLog.enabled"] == "true"
    assert tune.variant("base") == {}


def test_an_unknown_variant_is_named_in_a_one_line_error() -> None:
    with pytest.raises(SystemExit, match="no variant 'eventlogs'"):
        tune.variant("base+eventlogs")
