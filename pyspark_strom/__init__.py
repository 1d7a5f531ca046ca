"""The Spark connector: Spark finds `DefaultSource` in a `pyspark_*` module, so
`spark.read.format("strom")` needs no registration."""
