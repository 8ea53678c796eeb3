#!/bin/sh
# kafka-recon's install into an Airflow: the wheel beside the Airflow it runs with, and nothing
# else from the repository. docker/airflow.Dockerfile runs it into the image's Python;
# tests/integration/test_install.py runs the same script into fresh virtualenvs.
#
#   install.sh PYTHON WHEEL AIRFLOW_REQUIREMENT [CONSTRAINTS]
#
# AIRFLOW_REQUIREMENT keeps the Airflow already there (e.g. apache-airflow==3.3.2): kafka-recon's
# dependency ranges then resolve around it. CONSTRAINTS (optional) pins every other version,
# as Airflow's own constraint files do; `requirements.lock` is the one kafka-recon is tested on.
set -eu
python=$1
wheel=$2
airflow=$3
constraints=${4:-}
if [ -n "$constraints" ]; then
  set -- --constraint "$constraints"
else
  set --
fi
# the same requirements by either installer: pip in the Airflow image (as its docs extend it,
# as the airflow user, INSTALLER=pip), uv in the tests' fresh virtualenvs (its cache makes two
# installs a minute); --compile-bytecode as pip does, so no process compiles kafka-recon's
# modules again where it may not write them
if [ "${INSTALLER:-uv}" = pip ]; then
  "$python" -m pip install --no-cache-dir "$@" "$airflow" "$wheel"
else
  uv pip install --quiet --compile-bytecode --python "$python" "$@" "$airflow" "$wheel"
fi
