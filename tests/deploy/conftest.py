"""Markers of the deploy tests: `pytest tests/deploy -m image` runs the container-image
test alone (it builds the wheel and installs it into a fresh venv)."""


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "image: builds the wheel and installs it the way deploy/docker/Dockerfile does"
    )
