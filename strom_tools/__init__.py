"""The `strom` command line and its tools, after Kafka's (org.apache.kafka.tools,
kafka-topics.sh and the others): a package of its own, built on the public client API of
`strom` (docs/architecture.md §2), as Kafka keeps its tools apart from its clients.

`strom` (the console script) and `python -m strom_tools` run strom_tools.cli.main.
"""

# Before anything here imports grpc, which reads its experiments once, when loaded.
from strom_tools.grpc_engine import prefer_posix_endpoints

prefer_posix_endpoints()
