"""The `quorum-state` file: the election state a node must never forget.

Kafka's format (data_version 0), JSON in the metadata log directory:
    {"clusterId":"","leaderId":1,"leaderEpoch":5,"votedId":-1,"appliedOffset":0,
     "currentVoters":[{"voterId":1},{"voterId":2},{"voterId":3}],"data_version":0}
Written atomically (temp file, fsync, rename, fsync directory) before any vote is sent or
granted, so a node that crashes cannot vote twice in one epoch.

Every value is range-checked before it is written (an epoch in [0, MAX_EPOCH], ids in
[-1, 2^31-1], raft/limits.py) and when it is read. A file holding an out-of-range value (an
older version accepted a forged BeginQuorumEpoch(2^31-1) and persisted it) is refused with
a StorageError naming the file, so the node does not start, as Kafka refuses a quorum-state
it cannot read. Resetting the epoch instead is never safe: this node could then vote twice
in one epoch, or follow a leader the quorum has fenced. The repair is by hand (README.md):
an epoch above every one the quorum used, with no vote and no leader.
"""

from __future__ import annotations

import json
import os

from raft.limits import MAX_EPOCH, MAX_NODE_ID, check_range, out_of_range
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
            state = ElectionState(
                epoch=int(data["leaderEpoch"]),
                voted_for=int(data["votedId"]),
                leader_id=int(data["leaderId"]),
            )
        except FileNotFoundError:
            return ElectionState()
        except (ValueError, KeyError, TypeError) as exc:
            raise StorageError(f"{self.path} is not a valid quorum-state file: {exc}") from None
        problems = [p for p in _problems(state) if p is not None]
        if problems:
            raise StorageError(
                f"{self.path} holds a value out of range ({'; '.join(problems)}), as versions "
                "that accepted forged epochs wrote it; the node will not start on it, nor "
                "reset its epoch itself (README.md, The Raft quorum, says how to repair it)"
            )
        return state

    def write(self, state: ElectionState) -> None:
        check_range("leaderEpoch", state.epoch, 0, MAX_EPOCH)
        check_range("votedId", state.voted_for, -1, MAX_NODE_ID)
        check_range("leaderId", state.leader_id, -1, MAX_NODE_ID)
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


def _problems(state: ElectionState) -> list[str | None]:
    return [
        out_of_range("leaderEpoch", state.epoch, 0, MAX_EPOCH),
        out_of_range("votedId", state.voted_for, -1, MAX_NODE_ID),
        out_of_range("leaderId", state.leader_id, -1, MAX_NODE_ID),
    ]
