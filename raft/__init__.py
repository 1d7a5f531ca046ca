"""KRaft-style Raft quorum: a sans-I/O core, persisted quorum state, the metadata log on storage,
a driver and gRPC transport."""
