"""The Spark connector's tests share one 3-node cluster and one SparkSession (`local[2]`)
for the whole session: starting either takes seconds. Every test here is marked `spark`
(`pytest -m spark` runs them alone). Spark's Python workers run this interpreter
(PYSPARK_PYTHON), with the repository root on their path so that Spark's lookup of
`pyspark_*` modules finds `pyspark_strom` as it would in site-packages."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

from tests.client.cluster_helpers import bootstrap, started_cluster

ROOT = str(Path(__file__).resolve().parents[2])
HERE = str(Path(__file__).resolve().parent)


def pytest_collection_modifyitems(config, items):
    for item in items:
        if str(item.path).startswith(HERE):
            item.add_marker(pytest.mark.spark)


@pytest.fixture(scope="session")
def strom_cluster(tmp_path_factory):
    cluster = started_cluster(str(tmp_path_factory.mktemp("spark-cluster")))
    try:
        yield cluster
    finally:
        cluster.stop_all()


@pytest.fixture(scope="session")
def servers(strom_cluster):
    return bootstrap(strom_cluster)


@pytest.fixture(scope="session")
def spark():
    if not (shutil.which("java") or os.environ.get("JAVA_HOME")):
        # CI must run these; a developer machine without Java skips them, saying why.
        message = "Spark needs Java 17+: no java on the PATH and no JAVA_HOME"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    from pyspark import sql as pyspark_sql

    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    os.environ["PYTHONPATH"] = os.pathsep.join([ROOT, *paths])
    session = (
        pyspark_sql.SparkSession.builder.master("local[2]")
        .appName("strom-connector-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.python.worker.reuse", "true")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    try:
        yield session
    finally:
        session.stop()
