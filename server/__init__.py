"""The node process (docs/architecture.md §2): it reads server.properties, assembles the
Raft driver, the controller, the replica manager and the coordinators, opens the listeners
with their admission, authorization and gRPC servicers, and publishes its status to health
and metrics. Replication itself is broker/'s; the group coordinator is coordinator/'s."""
