"""The `quorum-state` file: the election state a node must never forget.

Kafka's format (data_version 0), JSON in the metadata log directory:
    {"clusterId":"","leaderId":1,"leaderEpoch":5,"votedId":-1,"appliedOffset":0,
     "currentVoters":[{"voterId":1},{"voterId":2},{"voterId":3}],"data_version":0}
Written atomically (temp file, fsync, rename, fsync directory) before any vote is sent or
granted, so a node that crashes cannot vote twice in one epoch.
"""

from __future__ import annotations

import json
import os

from raft.messages import ElectionState
from storage.errors import StorageError
from storage.file_io import atomic_write, remove_leftover_temp

FILE_NAME = "quorum-state"


class QuorumStateStore:
    def __init__(self, directory: str, voters: frozenset[int]) -> None:
        self.path = os.path.join(directory, FILE_NAME)
        self.voters = voters

    def read(self) -> ElectionState:
        remove_leftover_temp(self.path)
        try:
            with open(self.path, "rb") as f:
                data = json.loads(f.read())
            return ElectionState(
                epoch=int(data["leaderEpoch"]),
                voted_for=int(data["votedId"]),
                leader_id=int(data["leaderId"]),
            )
        except FileNotFoundError:
            return ElectionState()
        except (ValueError, KeyError, TypeError) as exc:
            raise StorageError(f"{self.path} is not a valid quorum-state file: {exc}") from None

    def write(self, state: ElectionState) -> None:
        data = {
            "clusterId": "",
            "leaderId": state.leader_id,
            "leaderEpoch": state.epoch,
            "votedId": state.voted_for,
            "appliedOffset": 0,
            "currentVoters": [{"voterId": v} for v in sorted(self.voters)],
            "data_version": 0,
        }
        atomic_write(self.path, json.dumps(data, separators=(",", ":")).encode())
