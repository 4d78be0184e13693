"""https: the streaming client speaks TLS (collect/http/connection.py, TLS over memory BIOs) to a
real TLS server on 127.0.0.1 whose self-signed certificate the test trusts through
SSL_CERT_FILE; an untrusted certificate fails as `connect`, naming the TLS reason."""

from __future__ import annotations

import asyncio
import datetime
import ipaddress
import ssl
from pathlib import Path

import httpx
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from specsweep.collect.engines.llamacpp import ChatStream
from specsweep.collect.http import client
from tests.support.raw_server import read_request

CHUNK = b'data: {"choices": [{"delta": {"content": "hi"}}]}\n\n'
FINAL = b'data: {"choices": [], "usage": {"completion_tokens": 2}}\n\n'
BODY = CHUNK + CHUNK + FINAL + b"data: [DONE]\n\n"
REPLY = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked"
    b"\r\n\r\n" + b"%x\r\n%s\r\n0\r\n\r\n" % (len(BODY), BODY)
)


def _certificate(folder: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 (and its key), valid for a day."""
    folder.mkdir(exist_ok=True)
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "specsweep test")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = folder / "cert.pem", folder / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


def _send_over_tls(cert: Path, key: Path) -> client.Result:
    async def go() -> client.Result:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(cert, key)

        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            try:
                await read_request(reader)
                writer.write(REPLY)
                await writer.drain()
            except (asyncio.IncompleteReadError, ConnectionError, ssl.SSLError):
                pass  # the client refused the certificate
            writer.close()

        server = await asyncio.start_server(handle, "127.0.0.1", 0, ssl=context)
        url = f"https://127.0.0.1:{server.sockets[0].getsockname()[1]}/v1/chat/completions"
        async with server, httpx.AsyncClient() as http:
            return await client.stream(http, url, {"x": 1}, ChatStream(), 5.0)

    return asyncio.run(go())


def test_a_trusted_tls_server_streams(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cert, key = _certificate(tmp_path)
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))
    result = _send_over_tls(cert, key)
    assert result.ok, result.error_message
    assert result.text == "hihi" and len(result.chunk_times_s) == 2


def test_an_untrusted_certificate_fails_as_connect(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cert, key = _certificate(tmp_path)
    other, _ = _certificate(tmp_path / "other")  # trusted: a different certificate
    monkeypatch.setenv("SSL_CERT_FILE", str(other))
    result = _send_over_tls(cert, key)
    assert result.error_kind == "connect"
    assert "certificate" in result.error_message.lower()
