"""InitProducerId: an idempotent producer's id and epoch (KIP-98), or its epoch bumped
(KIP-360: a producer that knows its id and epoch keeps the id).

Rules: the principal needs IDEMPOTENT_WRITE on the cluster or WRITE on some topic (KIP-679),
or WRITE on its transactional id; a transactional id is refused INVALID_REQUEST (Strom has
no transactions yet); new ids come from blocks the controller allocates
(broker/producer_ids.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from broker.producer_ids import ProducerIdManager
from metadata.errors import ApiError
from server.request_authorization import RequestAuthorizer
from server.request_session import Session


@dataclass(frozen=True, slots=True)
class InitProducerIdRequest:
    transactional_id: str  # "" for an idempotent producer
    producer_id: int = -1  # the producer's id to bump its epoch, else -1
    producer_epoch: int = -1  # its current epoch, else -1


@dataclass(frozen=True, slots=True)
class InitProducerIdAnswer:
    error: ApiError | None = None
    producer_id: int = -1
    producer_epoch: int = -1


async def init_producer_id(
    producer_ids: ProducerIdManager,
    authz: RequestAuthorizer,
    request: InitProducerIdRequest,
    session: Session | None,
) -> InitProducerIdAnswer:
    refusal = authz.init_producer_id(request.transactional_id, session)
    if refusal is not None:
        return InitProducerIdAnswer(refusal)
    try:
        pid, epoch = await producer_ids.init_producer_id(
            request.transactional_id, request.producer_id, request.producer_epoch
        )
    except ApiError as exc:
        return InitProducerIdAnswer(exc)
    return InitProducerIdAnswer(producer_id=pid, producer_epoch=epoch)
