"""One 3-node cluster per test module of the client-library tests."""

from __future__ import annotations

import pytest

from tests.client.cluster_helpers import started_cluster


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, request):
    cluster = started_cluster(
        str(tmp_path_factory.mktemp(request.module.__name__.rsplit(".", 1)[-1]))
    )
    try:
        yield cluster
    finally:
        cluster.stop_all()
