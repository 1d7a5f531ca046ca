"""strom_api/tls.py over real TLS on loopback: a gRPC server with ServerTls (mTLS), and
clients with ClientTls. Refusals are named ("SSL handshake failed"), a certificate
rewritten on disk is served at the next handshake without a restart, and the servicer sees
the client certificate's principal."""

from __future__ import annotations

import asyncio
import os
import shutil
import socket

import grpc
import grpc.aio
import pytest

from server.listener_security import ssl_principal
from strom_api.tls import (
    ClientTls,
    KeystoreSource,
    ServerTls,
    TruststoreSource,
    aio_channel,
    client_tls,
    handshake_failure,
    refused_authentication,
)
from tests.tls_certs import make_certs

METHOD = "/test.Who/Am"


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    return make_certs(str(tmp_path_factory.mktemp("certs")))


async def _serve(tls: ServerTls) -> tuple[grpc.aio.Server, int, grpc.aio.Server, int]:
    async def who(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        return ssl_principal(context.auth_context()).encode()

    handler = grpc.method_handlers_generic_handler(
        "test.Who", {"Am": grpc.unary_unary_rpc_method_handler(who)}
    )
    server = grpc.aio.server()
    server.add_generic_rpc_handlers((handler,))
    port = server.add_secure_port("127.0.0.1:0", tls.credentials())
    await server.start()
    return server, port, server, port


async def _ask(target: str, tls: ClientTls | None) -> str:
    channel = aio_channel(target, tls)
    try:
        answer = await channel.unary_unary(METHOD)(b"", timeout=5)
        return answer.decode()
    except grpc.aio.AioRpcError as exc:
        return "REFUSED " + (handshake_failure(exc.details(), tls) or str(exc.details()))
    finally:
        await channel.close()


def _server_tls(keystore: str, ca: str) -> ServerTls:
    return ServerTls(KeystoreSource(path=keystore), TruststoreSource(path=ca), True)


def test_mtls_accepts_the_ca_clients_and_names_the_refusals(certs):
    async def scenario() -> dict[str, str]:
        server, port, _, _ = await _serve(_server_tls(certs.node_keystore, certs.ca))
        target = f"127.0.0.1:{port}"
        try:
            return {
                "client": await _ask(target, client_tls(certs.ca, certs.client_keystore)),
                "localhost": await _ask(
                    f"localhost:{port}", client_tls(certs.ca, certs.client_keystore)
                ),
                "no certificate": await _ask(target, client_tls(certs.ca)),
                "other CA's certificate": await _ask(
                    target, client_tls(certs.ca, certs.other_client_keystore)
                ),
                "wrong CA trusted": await _ask(
                    target, client_tls(certs.other_ca, certs.client_keystore)
                ),
                "plaintext": await _ask(target, None),
                "after": await _ask(target, client_tls(certs.ca, certs.client_keystore)),
            }
        finally:
            await server.stop(0)

    answers = asyncio.run(scenario())
    assert answers["client"] == "User:CN=strom-client"
    assert answers["localhost"] == "User:CN=strom-client"
    for case in ("no certificate", "other CA's certificate"):
        assert answers[case].startswith("REFUSED SSL handshake failed"), answers[case]
        assert "client certificate" in answers[case]
    assert answers["wrong CA trusted"].startswith("REFUSED SSL handshake failed")
    assert "CERTIFICATE_VERIFY_FAILED" in answers["wrong CA trusted"]
    assert "probably expects SSL" in answers["plaintext"]
    assert answers["after"] == "User:CN=strom-client"  # the refusals left it serving


def test_a_close_during_the_handshake_is_a_refusal_only_while_the_address_listens(certs):
    """A refused client certificate and a node killed mid-handshake both reach the client
    as a TLS connection closed as it opened: the first is raised at once, the second is
    retried (chaos: a client must not give up on a cluster whose node was killed)."""
    tls = client_tls(certs.ca)  # no certificate where one is required

    async def refusal_while_serving() -> tuple[str, str]:
        server, port, _, _ = await _serve(_server_tls(certs.node_keystore, certs.ca))
        try:
            return f"127.0.0.1:{port}", await _ask(f"127.0.0.1:{port}", tls)
        finally:
            await server.stop(0)

    target, answer = asyncio.run(refusal_while_serving())
    why = answer.removeprefix("REFUSED ")
    assert why.startswith("SSL handshake failed: the server closed the connection"), why
    server = socket.create_server(("127.0.0.1", int(target.rpartition(":")[2])))
    try:
        assert refused_authentication(why, tls, target)  # the address still listens
    finally:
        server.close()
    assert not refused_authentication(why, tls, target)  # gone: a node that went down
    # A named handshake failure and a SASL refusal need no probe; plaintext is never one.
    named = "SSL handshake failed: CERTIFICATE_VERIFY_FAILED"
    assert refused_authentication(named, tls, target)
    assert refused_authentication("SASL_AUTHENTICATION_FAILED: bad password", None, target)
    assert not refused_authentication(why, None, target)


def test_hostname_is_checked_unless_turned_off(certs):
    """The node certificate names 127.0.0.1 and localhost: dialled as 127.0.0.2 (also
    loopback) the name does not match, unless the check is off."""

    async def scenario() -> tuple[str, str]:
        server = grpc.aio.server()
        handler = grpc.method_handlers_generic_handler(
            "test.Who",
            {"Am": grpc.unary_unary_rpc_method_handler(lambda request, context: b"ok")},
        )
        server.add_generic_rpc_handlers((handler,))
        tls = _server_tls(certs.node_keystore, certs.ca)
        port = server.add_secure_port("0.0.0.0:0", tls.credentials())
        await server.start()
        try:
            checked = await _ask(f"127.0.0.2:{port}", client_tls(certs.ca, certs.client_keystore))
            unchecked = await _ask(
                f"127.0.0.2:{port}",
                client_tls(certs.ca, certs.client_keystore, check_hostname=False),
            )
            return checked, unchecked
        finally:
            await server.stop(0)

    checked, unchecked = asyncio.run(scenario())
    assert checked.startswith("REFUSED SSL handshake failed"), checked
    assert unchecked == "ok"


def test_a_rewritten_keystore_is_served_without_a_restart(certs, tmp_path):
    """cert-manager rewrites the files in place: the next handshake uses the new
    certificate. Clients trusting only the other CA are refused before and served after the
    node's keystore (and truststore) are replaced by ones of that CA."""
    keystore, truststore = str(tmp_path / "node.pem"), str(tmp_path / "ca.pem")
    shutil.copy(certs.node_keystore, keystore)
    shutil.copy(certs.ca, truststore)
    errors: list[str] = []
    tls = ServerTls(
        KeystoreSource(path=keystore), TruststoreSource(path=truststore), True, errors.append
    )

    async def scenario() -> list[str]:
        server, port, _, _ = await _serve(tls)
        target = f"127.0.0.1:{port}"
        other_client = client_tls(certs.other_ca, certs.other_client_keystore)
        try:
            seen = [await _ask(target, other_client)]
            with open(keystore, "wb") as f:  # half-written: refused, the old one stays
                f.write(b"-----BEGIN PRIVATE KEY-----\n")
            seen.append(await _ask(target, client_tls(certs.ca, certs.client_keystore)))
            shutil.copy(certs.other_node_keystore, keystore)
            shutil.copy(certs.other_ca, truststore)
            os.utime(keystore, (1, 1))  # a distinct stamp even within one clock tick
            seen.append(await _ask(target, other_client))
            seen.append(await _ask(target, client_tls(certs.ca, certs.client_keystore)))
            return seen
        finally:
            await server.stop(0)

    before, during, after, old_client = asyncio.run(scenario())
    assert before.startswith("REFUSED SSL handshake failed")
    assert during == "User:CN=strom-client"
    assert errors and "private key" in errors[0]
    assert after == "User:CN=intruder"
    assert old_client.startswith("REFUSED SSL handshake failed")
    assert tls.reloads == 1
