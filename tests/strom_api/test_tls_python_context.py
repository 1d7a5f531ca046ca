"""ServerTls.ssl_context: a listener's TLS material for Python's ssl (the Kafka protocol
listener on asyncio streams), with client certificates required or requested, and files
rewritten in place served from the next handshake on, as the gRPC listeners do."""

from __future__ import annotations

import asyncio
import os
import shutil
import ssl

import pytest
from cryptography import x509

from strom_api.tls import KeystoreSource, ServerTls, TruststoreSource
from tests.tls_certs import make_certs


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    return make_certs(str(tmp_path_factory.mktemp("certs")))


async def _who(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Answers with the subject of the client's certificate ("-" without one)."""
    der = writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
    name = x509.load_der_x509_certificate(der).subject.rfc4514_string() if der else "-"
    writer.write(name.encode())
    await writer.drain()
    writer.close()


async def _ask(port: int, ca: str, keystore: str | None) -> str:
    context = ssl.create_default_context(cafile=ca)
    if keystore is not None:
        context.load_cert_chain(keystore)
    try:
        reader, writer = await asyncio.open_connection(
            "127.0.0.1", port, ssl=context, server_hostname="localhost"
        )
        answer = await asyncio.wait_for(reader.read(), 5)
        writer.close()
    except (ssl.SSLError, ConnectionError) as exc:
        return f"REFUSED {type(exc).__name__}"
    # TLS 1.3: a refused client certificate shows only when the client reads.
    return answer.decode() or "REFUSED (closed)"


def _run(tls: ServerTls, requested: bool, *clients: tuple[str, str | None]) -> list[str]:
    async def scenario() -> list[str]:
        server = await asyncio.start_server(
            _who, "127.0.0.1", 0, ssl=tls.ssl_context(request_client_cert=requested)
        )
        port = server.sockets[0].getsockname()[1]
        try:
            return [await _ask(port, ca, keystore) for ca, keystore in clients]
        finally:
            server.close()
            await server.wait_closed()

    return asyncio.run(scenario())


def test_a_client_certificate_is_required_or_requested(certs):
    required = ServerTls(KeystoreSource(path=certs.node_keystore), TruststoreSource(certs.ca), True)
    answers = _run(
        required,
        False,
        (certs.ca, certs.client_keystore),
        (certs.ca, None),
        (certs.ca, certs.other_client_keystore),
    )
    assert answers[0] == "CN=strom-client"
    assert answers[1].startswith("REFUSED") and answers[2].startswith("REFUSED"), answers
    requested = ServerTls(
        KeystoreSource(path=certs.node_keystore), TruststoreSource(certs.ca), False
    )
    assert _run(requested, True, (certs.ca, certs.alice_keystore), (certs.ca, None)) == [
        "CN=alice",
        "-",
    ]
    # ssl.client.auth=none: not even asked for.
    assert _run(requested, False, (certs.ca, certs.alice_keystore)) == ["-"]


def test_a_rewritten_keystore_is_served_from_the_next_handshake(certs, tmp_path):
    keystore, truststore = str(tmp_path / "node.pem"), str(tmp_path / "ca.pem")
    shutil.copy(certs.node_keystore, keystore)
    shutil.copy(certs.ca, truststore)
    errors: list[str] = []
    tls = ServerTls(
        KeystoreSource(path=keystore), TruststoreSource(path=truststore), True, errors.append
    )

    async def scenario() -> list[str]:
        server = await asyncio.start_server(_who, "127.0.0.1", 0, ssl=tls.ssl_context())
        port = server.sockets[0].getsockname()[1]
        ours, theirs = (
            (certs.ca, certs.client_keystore),
            (certs.other_ca, certs.other_client_keystore),
        )
        try:
            seen = [await _ask(port, *theirs)]
            with open(keystore, "wb") as f:  # half-written: refused, the old one stays
                f.write(b"-----BEGIN PRIVATE KEY-----\n")
            seen.append(await _ask(port, *ours))
            shutil.copy(certs.other_node_keystore, keystore)
            shutil.copy(certs.other_ca, truststore)
            os.utime(keystore, (1, 1))  # a distinct stamp even within one clock tick
            seen.append(await _ask(port, *theirs))
            seen.append(await _ask(port, *ours))
            return seen
        finally:
            server.close()
            await server.wait_closed()

    before, during, after, old_client = asyncio.run(scenario())
    assert before.startswith("REFUSED")
    assert during == "CN=strom-client"
    assert errors and "private key" in errors[0]
    assert after == "CN=intruder"
    assert old_client.startswith("REFUSED")
    assert tls.reloads == 1
