"""Entry points behind `strom server`, `strom storage format` and `strom storage info`
(strom_tools/cli.py imports this lazily, so the client side never loads the server).

A bad configuration or an unformatted directory ends the command with one line naming the
problem (Kafka's error name and a sentence) and exit code 1, never a traceback.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import signal
import sys
from collections.abc import Sequence
from typing import Any

import uvloop

from metadata import scram_parser
from server import bootstrap_checkpoint, loop_health, malloc_tuning, server_config
from storage import meta_properties
from storage.errors import StorageError


def _fail(error: StorageError) -> int:
    print(f"ERROR {error.error_name}: {error}", file=sys.stderr)
    return 1


def format_storage(
    config_path: str,
    cluster_id: str,
    overrides: Sequence[str],
    ignore_formatted: bool,
    add_scram: Sequence[str] = (),
) -> int:
    """kafka-storage.sh format: meta.properties into every log dir and the metadata dir, and
    the bootstrap checkpoint (server/bootstrap_checkpoint.py: the --add-scram users) into the
    metadata dir. Bad --add-scram text fails before any directory is touched."""
    try:
        config = server_config.load(config_path, overrides)
        bootstrap_records = scram_parser.parse(add_scram)
        directories = list(dict.fromkeys([*config.log_dirs, config.metadata_log_dir]))
        formatted = meta_properties.format_dirs(
            directories, cluster_id, config.node_id, ignore_formatted
        )
        if config.metadata_log_dir in formatted:
            bootstrap_checkpoint.write(config.metadata_log_dir, bootstrap_records)
    except StorageError as error:
        return _fail(error)
    for directory in formatted:
        print(f"Formatting {directory} with metadata.version (cluster id {cluster_id}).")
    return 0


def storage_info(config_path: str, overrides: Sequence[str] = ()) -> int:
    """kafka-storage.sh info: the node's log.dirs and metadata.log.dir as they are now."""
    from server.storage_info import storage_info as info

    try:
        config = server_config.load(config_path, overrides)
    except StorageError as error:
        return _fail(error)
    return info([*config.log_dirs, config.metadata_log_dir])


def run_server(config_path: str, overrides: Sequence[str]) -> int:
    logging.basicConfig(
        level=logging.INFO, format="[%(asctime)s] %(levelname)s %(name)s: %(message)s"
    )
    try:
        config = server_config.load(config_path, overrides)
    except StorageError as error:
        return _fail(error)
    # The node's code, loaded here rather than at the top so that `strom storage format`
    # does not load it (half its start-up), and before the freeze, which is of what the
    # imports made.
    import server.node  # noqa: F401

    malloc_tuning.keep_large_allocations()
    # Said by strom_gc_frozen_objects, not logged: a node that cannot start prints one line.
    loop_health.freeze_loaded_code()
    result: int = uvloop.run(_serve(config))
    return result


async def _serve(config: server_config.ServerConfig) -> int:
    from raft.transport import BindError
    from server.node import Node

    node = Node(config)
    try:
        await node.start()
    except StorageError as error:
        return _fail(error)
    except BindError as error:
        print(f"ERROR {error}", file=sys.stderr)
        return 1
    log = logging.getLogger("strom.server")
    log.info("started %s", node.describe())
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    log.info("stopping (controlled shutdown)")
    watchdog = asyncio.create_task(_report_slow_stop(log))
    try:
        await node.stop()
    except Exception:
        # Said at once, and the process ends here: the loop's own teardown would cancel the
        # parts stop() never reached and wait for them, which may be forever, while the
        # operator watches a silent process that was asked to stop. What was written is in
        # the kernel's page cache already; the next start recovers past the last flush.
        log.exception("the controlled shutdown failed; stopping anyway")
        logging.shutdown()
        os._exit(1)
    watchdog.cancel()
    log.info("stopped")
    return 0


# Under the 30 s the controlled shutdown may take, over what the rest of a stop takes, and
# under the 60 s `make run`'s supervisor waits before it kills a node.
SLOW_STOP_S = 45.0


async def _report_slow_stop(log: logging.Logger) -> None:
    """A stop that outlasts SLOW_STOP_S logs where every task of the loop waits, so a node
    killed for a stop that hung leaves in its log what it was waiting for."""
    await asyncio.sleep(SLOW_STOP_S)
    stacks = [_where_it_waits(task) for task in asyncio.all_tasks()]
    log.warning("still stopping after %g s; the tasks wait in:\n%s", SLOW_STOP_S, "\n".join(stacks))


def _where_it_waits(task: asyncio.Task[Any]) -> str:
    """The task and the chain of coroutines it awaits, innermost last. Walked by hand, not
    with Task.print_stack: that raises TypeError on grpc.aio's Cython coroutines (their
    frames have no line number), which are the tasks that serve RPCs, and the report died at
    the first one. The wrappers Cython puts around an awaited coroutine (and an async
    generator's asend) hide what they wrap except to the garbage collector, which is asked,
    so the chain reaches our own handler under grpc's."""
    lines = [repr(task)]
    awaited: Any = task.get_coro()
    for _ in range(32):  # a chain, not a cycle; bounded all the same
        frame = next(
            (
                getattr(awaited, a)
                for a in ("cr_frame", "gi_frame", "ag_frame")
                if getattr(awaited, a, None)
            ),
            None,
        )
        if frame is not None:
            code = frame.f_code
            lines.append(f"  {code.co_filename}:{frame.f_lineno} in {code.co_name}")
        following = next(
            (
                getattr(awaited, a)
                for a in ("cr_await", "gi_yieldfrom", "ag_await")
                if getattr(awaited, a, None) is not None
            ),
            None,
        )
        if following is None and frame is None:
            following = next((r for r in gc.get_referents(awaited) if _is_coroutine_like(r)), None)
        if following is None:
            break
        awaited = following
    return "\n".join(lines)


def _is_coroutine_like(thing: object) -> bool:
    return any(hasattr(thing, a) for a in ("cr_frame", "gi_frame", "ag_frame"))
