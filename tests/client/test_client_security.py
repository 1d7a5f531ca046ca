"""strom/security.client_security, the ssl_* settings every client takes as kafka-python
names them: a private key in a file of its own (ssl_keyfile) and the password of an
encrypted key (ssl_password) are applied, and what is missing or wrong is INVALID_CONFIG
naming the setting."""

from __future__ import annotations

import pytest
from cryptography.hazmat.primitives import serialization

from strom.errors import StromError
from strom.security import client_security
from strom_api.tls import ClientTls
from tests.tls_certs import ENCRYPTED_PASSWORD, make_certs


def _split(keystore: str, directory) -> tuple[str, str]:
    """The keystore's encrypted key and its certificate chain, each in a file of its own."""
    text = open(keystore).read()
    cut = text.index("-----BEGIN CERTIFICATE-----")
    key, chain = directory / "client.key", directory / "client-chain.pem"
    key.write_text(text[:cut])
    chain.write_text(text[cut:])
    return str(key), str(chain)


def test_a_separate_encrypted_key_file_is_read_with_its_password(tmp_path):
    certs = make_certs(str(tmp_path / "certs"))
    key_file, chain_file = _split(certs.encrypted_node_keystore, tmp_path)
    assert "ENCRYPTED PRIVATE KEY" in open(key_file).read()
    tls = client_security(
        "SSL",
        ssl_cafile=certs.ca,
        ssl_certfile=chain_file,
        ssl_keyfile=key_file,
        ssl_password=ENCRYPTED_PASSWORD,
    )
    assert isinstance(tls, ClientTls) and tls.pair is not None
    # The key presented is the encrypted one, decrypted; the chain the one given.
    clear = serialization.load_pem_private_key(tls.pair.key, password=None)
    encrypted = serialization.load_pem_private_key(
        open(key_file, "rb").read(), password=ENCRYPTED_PASSWORD.encode()
    )
    assert clear.public_key().public_numbers() == encrypted.public_key().public_numbers()
    assert tls.pair.chain.strip() == open(chain_file, "rb").read().strip()


@pytest.mark.parametrize(
    ("keyfile", "password", "said"),
    [
        (True, None, "in ssl_keyfile"),  # an encrypted key and no password: set ssl_password
        (True, "not-the-password", "could not be decrypted with ssl_password"),
        (False, ENCRYPTED_PASSWORD, "exactly one PEM private key"),  # the chain alone
    ],
)
def test_a_key_that_cannot_be_read_is_named(tmp_path, keyfile, password, said):
    certs = make_certs(str(tmp_path / "certs"))
    key_file, chain_file = _split(certs.encrypted_node_keystore, tmp_path)
    with pytest.raises(StromError) as caught:
        client_security(
            "SSL",
            ssl_cafile=certs.ca,
            ssl_certfile=chain_file,
            ssl_keyfile=key_file if keyfile else None,
            ssl_password=password,
        )
    assert caught.value.name == "INVALID_CONFIG"
    assert said in caught.value.message, caught.value.message
    if keyfile:  # the key's file is named by the setting it came from
        assert f"ssl_keyfile {key_file}" in caught.value.message
