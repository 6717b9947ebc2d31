"""A test CA and a certificate for 127.0.0.1 signed by it, made with the ``openssl`` program:
for HTTPS servers (the scripted model, MCP servers) that a client trusts only through
``SSL_CERT_FILE`` or ``NODE_EXTRA_CA_CERTS``."""

from __future__ import annotations

import shutil
import ssl
import subprocess
from pathlib import Path

import pytest

__all__ = ["Certificates", "certificates_fixture"]


class Certificates:
    """A CA and a certificate for 127.0.0.1 signed by it, made with the openssl program."""

    def __init__(self, folder: Path) -> None:
        self.ca = folder / "ca.pem"
        self.cert = folder / "server.pem"
        self.key = folder / "server-key.pem"
        ca_key = folder / "ca-key.pem"
        request = folder / "server.csr"
        extensions = folder / "server.ext"
        extensions.write_text(
            "basicConstraints=critical,CA:FALSE\n"
            "keyUsage=critical,digitalSignature,keyEncipherment\n"
            "extendedKeyUsage=serverAuth\n"
            "subjectAltName=IP:127.0.0.1,DNS:localhost\n"
        )
        ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
        _openssl(
            "req", "-x509", *ec, "-keyout", ca_key, "-out", self.ca, "-days", "2",
            "-subj", "/CN=cairn test CA",
            "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign,cRLSign",
        )  # fmt: skip
        _openssl("req", "-new", *ec, "-keyout", self.key, "-out", request, "-subj", "/CN=127.0.0.1")
        _openssl(
            "x509", "-req", "-in", request, "-CA", self.ca, "-CAkey", ca_key,
            "-CAcreateserial", "-out", self.cert, "-days", "2", "-extfile", extensions,
        )  # fmt: skip

    def server_context(self) -> ssl.SSLContext:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(self.cert, self.key)
        return context


def _openssl(*args: str | Path) -> None:
    subprocess.run(["openssl", *map(str, args)], check=True, capture_output=True, timeout=60)


@pytest.fixture(scope="module", name="certificates")
def certificates_fixture(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    if shutil.which("openssl") is None:
        pytest.skip("the openssl program is not installed (.ci/system-packages)")
    return Certificates(tmp_path_factory.mktemp("certificates"))
