"""The gRPC options of a broker's channels to other nodes: messages up to the 128 MiB a
node's server sends (server/node.py), not gRPC's default 4 MiB. A leader's fetch answer and
a controller's answer to a forwarded admin request (a DescribeConfigs or DescribeTopics of
a large cluster) are often larger; refused by the default, a forwarded request was sent
again and again until its 30 s deadline, the controller doing its work each time."""

from __future__ import annotations

MAX_MESSAGE_BYTES = 128 * 1024 * 1024

CHANNEL_OPTIONS = [
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
]
