"""One background thread running an asyncio event loop, shared by the synchronous clients
of a process: they hand it coroutines and wait on concurrent futures, as kafka-python's
clients hand work to their I/O thread."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

_lock = threading.Lock()
_shared: LoopThread | None = None


class LoopThread:
    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name="strom-io", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def submit(self, coroutine: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop)

    def run(self, coroutine: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        return self.submit(coroutine).result(timeout)

    def in_loop(self) -> bool:
        return threading.current_thread() is self._thread


def shared_loop() -> LoopThread:
    """The process's I/O thread, started on first use (a daemon: it never keeps a process
    alive; clients flush in close())."""
    global _shared
    with _lock:
        if _shared is None:
            _shared = LoopThread()
        return _shared
