"""`kafka-recon check` on a secured cluster: every flow that could run says what a run would read;
each one that could not is named with each of its problems (a wrong password, a missing ACL, an
unknown connection, a typo in a field), and the command exits 2. No Spark starts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from harness.services.kafka import KafkaCluster
from harness.services.kafka_security import grant, reader_acls
from tests.integration.engine_harness import END, START, Scenario

pytestmark = pytest.mark.integration

N = 12
KAFKA_RECON = Path(sys.executable).parent / "kafka-recon"


def check(config: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(KAFKA_RECON), "check", "--config", str(config),
                           "--start", START.isoformat(), "--end", END.isoformat(), *args],
                          env=env, capture_output=True, text=True, timeout=300, check=False)


def test_check_exits_0_for_flows_that_could_run_and_2_naming_each_problem(
        tmp_path: Path, kafka: KafkaCluster) -> None:
    assert kafka.security is not None
    conns = {name: f"kafka_{name}_{uuid.uuid4().hex[:6]}" for name in ("good", "badpw", "lim")}
    env = {**os.environ,
           **{f"AIRFLOW_CONN_{c.upper()}": json.dumps({"conn_type": "kafka", "extra": conf})
              for c, conf in ((conns["good"], kafka.security.sasl(kafka.sasl_bootstrap)),
                              (conns["badpw"], kafka.security.sasl(
                                  kafka.sasl_bootstrap, password="not-the-password")),
                              (conns["lim"], kafka.security.sasl(kafka.sasl_bootstrap,
                                                                 user="limited")))}}
    scn = Scenario(tmp_path, kafka.bootstrap, groups=["loader"], kafka_conn=conns["good"])
    scn.flow_through(N)
    grant(kafka.bootstrap, "recon", reader_acls(scn.topic, ["loader"]))
    grant(kafka.bootstrap, "limited", [("TOPIC", scn.topic, "LITERAL", "DESCRIBE")])
    body = scn.config.read_text().split("  f:\n", 1)[1]
    assert "grace: 10m" in body and str(scn.down_url) in body
    variants = {
        "good": body,
        "wrong_password": body.replace(conns["good"], conns["badpw"]),
        "missing_acl": body.replace(conns["good"], conns["lim"]),
        "unknown_conn": body.replace(str(scn.down_url), "no_such_db"),
        "typo": body.replace("grace: 10m", "grase: 10m"),
    }
    config = tmp_path / "check.yaml"
    config.write_text("flows:\n" + "".join(f"  {n}:\n{b}" for n, b in variants.items()))

    every = check(config, env)
    out = every.stdout
    assert every.returncode == 2, out + every.stderr
    assert "flow 'good': could run" in out
    assert f"db: sqlite file {scn.up}: {N} row(s) in the window (ids)" in out
    assert f"{N} record(s) in the window" in out
    assert "flow 'wrong_password': cannot run" in out
    assert "authentication failed for user 'recon'" in out
    assert "flow 'missing_acl': cannot run" in out
    # the topic's READ is named; how many ACLs 'limited' lacks in all depends on what other
    # tests granted it on this session's broker (its group ACLs), so the count is not asserted
    block = out.split("flow 'missing_acl'", 1)[1].split("\nflow '", 1)[0]
    assert "kafka-recon's principal lacks" in block, block
    assert f"READ on Topic:{scn.topic} (the replay cannot read records)" in block, block
    assert "flow 'unknown_conn': cannot run" in out
    assert "connection 'no_such_db': neither a URL, nor set as AIRFLOW_CONN_NO_SUCH_DB" in out
    assert "flow 'typo': cannot run" in out and "field 'grase'" in out
    assert "1 of 5 flow(s) could run; not: missing_acl, typo, unknown_conn, wrong_password" in out

    one = check(config, env, "--flow", "good", "--json")
    assert one.returncode == 0, one.stdout + one.stderr
    [answer] = json.loads(one.stdout)["flows"]
    assert answer["could_run"] and answer["errors"] == []

