"""What a handler may answer instead of a response (connection.py acts on it), sans-I/O.

- None: no response at all, the connection goes on (Kafka's sendNoOpResponse: an acks=0
  Produce that went well; the producer waits for no answer, so the next response the
  client reads is its next request's, under that request's correlation id).
- CloseConnection raised: no response and the connection closed, logged at INFO with the
  reason (Kafka's closeConnection: an acks=0 Produce with an error; its producer is told
  only by the closed connection, after which it refreshes its metadata).
"""

from __future__ import annotations


class CloseConnection(Exception):
    """The request is answered by closing its connection; the message says why."""
