"""The Spark connector's tests share one 3-node cluster and one SparkSession (`local[2]`)
for the whole session: starting either takes seconds. Every test here is marked `spark`
(`pytest -m spark` runs them alone). Spark's Python workers run this interpreter
(PYSPARK_PYTHON), with the repository root on their path so that Spark's lookup of
`pyspark_*` modules finds `pyspark_strom` as it would in site-packages."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.client.cluster_helpers import bootstrap, started_cluster
from tests.spark_session import local_spark_session

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
    session = local_spark_session()
    try:
        yield session
    finally:
        session.stop()
