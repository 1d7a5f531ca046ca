"""The Spark connector: Spark finds `DefaultSource` in a `pyspark_*` module, so
`spark.read.format("strom")` needs no registration once this package is installed in the
Python that Spark's workers run (PYSPARK_PYTHON)."""

from pyspark_strom.source import DefaultSource

__all__ = ["DefaultSource"]
