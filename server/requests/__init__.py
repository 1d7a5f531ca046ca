"""The broker's request paths, front-end-neutral: what a client's Produce, Fetch,
ListOffsets, OffsetsForLeaderEpoch, InitProducerId and DeleteRecords ask (and the
consumer-group requests around the group coordinator, groups.py), answered with
every rule the broker applies to them (authorization, partitions named twice, the request
memory, defaults Kafka states, the calls into the replica manager and the producer-id
manager), over plain frozen dataclasses and ErrorCode errors (`metadata.errors.ApiError`).

One module per API. Each handler takes the request as a dataclass and the caller's
Session (server/request_session.py; None for the node's own work) and returns the answer
as dataclasses, one entry per partition the request named, in the request's order. A
front end only converts: the gRPC servicer (server/client_service.py) turns protobuf into
these requests and the answers back; the Kafka listener does the same with Kafka's
messages. No rule lives in a front end, so a second one copies none (issue 20).

Records stay as the client sent them: a produce hands each partition's RecordBatch bytes
through whole, a fetch answers each partition's bytes as read from the log; nothing here
looks at a record.
"""
