"""The Kafka protocol listener (issue 20): Kafka's binary protocol on the broker listeners
that `kafka.listener.names` names (server/listeners.py), for Kafka's own clients and tools.

It converts at its edge and calls the functions the gRPC servicers call: no rule is written
twice. Messages are parsed and encoded with kio (README "Kafka protocol listener: codec
choice"); the modules:
- apis.py: the one table of (API key, version range) served; ApiVersions advertises it and
  the dispatcher refuses anything else, so nothing is advertised that is not served.
- frames.py (sans-I/O): a request frame to its header and body, or why it is refused; a
  response to its frame.
- versioned.py: a response of the request's version from version-independent values.
- error_codes.py: strom_api ErrorCode members to Kafka's numeric codes.
- api_versions.py, metadata_api.py: the APIs served.
- topic_admin.py (CreateTopics, DeleteTopics, CreatePartitions), config_admin.py
  (DescribeConfigs, IncrementalAlterConfigs, AlterConfigs) and cluster_admin.py
  (DescribeCluster, ElectLeaders, the partition reassignments, DescribeQuorum): on the
  gRPC admin path; broker_admin.py (DescribeLogDirs, DescribeProducers) through
  server/requests/ on this broker's replicas
  (controller_forwarder.authorized_forwarding); controller_answers.py and
  config_entries.py read the controller's answers.
- handlers.py: the dispatcher (one request at a time per connection, as Kafka's).
- connection.py, listener.py: the asyncio edge: one task per connection, the server the
  node binds per Kafka listener and lets serve once the broker serves.
"""
