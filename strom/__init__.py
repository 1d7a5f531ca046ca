"""User-facing Strom: the client library and the `strom` command line."""
