"""TLS for both OTLP listeners, with certificates rotated without a restart.

The files (certificate chain, key, optional client CA for mTLS) are loaded at start;
a bad set is a configuration error, and so is one another user owns or could write,
or a private key of this user's that group or others may read (`ingest.filecheck`,
as OpenSSH checks its keys). `reload_if_changed` (called periodically by the
service) loads them again when their stat signature changed; a set that does not
load (a key not matching its certificate half-way through a rotation, say) keeps
the old one and logs why. New connections then use the new set, existing ones
keep theirs:

- HTTP: the listener's context swaps every handshake onto the current context from
  its SNI callback (OpenSSL calls it with or without a server name).
- gRPC: grpcio asks a certificate-configuration fetcher before every handshake.

grpcio exposes no minimum protocol version: its floor is TLS 1.2 whatever
`min_version` says (it negotiates 1.3 with every client that offers it).
"""

from __future__ import annotations

import logging
import os
import ssl
from dataclasses import dataclass
from pathlib import Path

import grpc

from ingest.filecheck import UnsafeFile, check_trusted

log = logging.getLogger(__name__)

VERSIONS = {"1.2": ssl.TLSVersion.TLSv1_2, "1.3": ssl.TLSVersion.TLSv1_3}


class TlsError(ValueError):
    """The TLS files cannot be used (missing, unreadable, not matching)."""


@dataclass(frozen=True)
class TlsFiles:
    cert_file: Path
    key_file: Path
    client_ca_file: Path | None = None
    min_version: str = "1.2"

    def paths(self) -> list[Path]:
        return [p for p in (self.cert_file, self.key_file, self.client_ca_file) if p]


@dataclass(frozen=True)
class _Material:
    signature: Signature
    context: ssl.SSLContext
    cert_chain: bytes
    key: bytes
    client_ca: bytes | None


Signature = tuple[tuple[int, ...], ...]


def _signature(files: TlsFiles) -> Signature:
    """Changes with each file's content, owner or mode (a chmod changes ctime)."""
    stats = [os.stat(path) for path in files.paths()]
    return tuple(
        (s.st_mtime_ns, s.st_ctime_ns, s.st_size, s.st_ino, s.st_mode, s.st_uid) for s in stats
    )


def _check(files: TlsFiles) -> None:
    try:
        check_trusted(files.cert_file, "TLS certificate file")
        check_trusted(files.key_file, "TLS private key", secret=True)
        if files.client_ca_file is not None:
            check_trusted(files.client_ca_file, "TLS client CA file")
    except UnsafeFile as err:
        raise TlsError(err.strerror) from None


def _load(files: TlsFiles) -> _Material:
    try:
        signature = _signature(files)
        _check(files)
        cert_chain = files.cert_file.read_bytes()
        key = files.key_file.read_bytes()
        client_ca = files.client_ca_file.read_bytes() if files.client_ca_file else None
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = VERSIONS[files.min_version]
        context.load_cert_chain(files.cert_file, files.key_file)
        if files.client_ca_file is not None:
            context.verify_mode = ssl.CERT_REQUIRED
            context.load_verify_locations(cafile=files.client_ca_file)
        # OTLP/HTTP is HTTP/1.1 here (aiohttp).
        context.set_alpn_protocols(["http/1.1"])
    except (OSError, ssl.SSLError) as err:
        raise TlsError(f"TLS files {', '.join(map(str, files.paths()))}: {err}") from None
    return _Material(signature, context, cert_chain, key, client_ca)


class ServerTls:
    """The current TLS material of the receiver and the two listeners' views of it."""

    def __init__(self, files: TlsFiles) -> None:
        self.files = files
        self._material = _load(files)
        self.generation = 0
        self._served_generation = 0
        self._refused: Signature | None = None

    @property
    def mutual(self) -> bool:
        return self.files.client_ca_file is not None

    def reload_if_changed(self) -> bool:
        """Load the files again if they changed; True when new material is in use."""
        try:
            signature = _signature(self.files)
            if signature in (self._material.signature, self._refused):
                return False
            material = _load(self.files)
        except (OSError, TlsError) as err:
            # Said once per bad version of the files, not at every check.
            self._refused = signature if isinstance(err, TlsError) else None
            log.warning("TLS files changed but cannot be loaded, keeping the old ones: %s", err)
            return False
        self._material = material
        self.generation += 1
        log.info("TLS certificate reloaded from %s", self.files.cert_file)
        return True

    def ssl_context(self) -> ssl.SSLContext:
        """The HTTP listener's context: each handshake moves to the current material."""
        listener = _load(self.files).context

        def current(ssl_object: ssl.SSLObject, server_name: str | None, _: ssl.SSLContext) -> None:
            ssl_object.context = self._material.context

        listener.sni_callback = current
        return listener

    def grpc_credentials(self) -> grpc.ServerCredentials:
        return grpc.dynamic_ssl_server_credentials(
            self._grpc_configuration(),
            self._fetch,
            require_client_authentication=self.mutual,
        )

    def _grpc_configuration(self) -> grpc.ServerCertificateConfiguration:
        material = self._material
        return grpc.ssl_server_certificate_configuration(
            [(material.key, material.cert_chain)], root_certificates=material.client_ca
        )

    def _fetch(self) -> grpc.ServerCertificateConfiguration | None:
        """Called by grpcio before each handshake: None keeps the configuration it has."""
        if self._served_generation == self.generation:
            return None
        self._served_generation = self.generation
        return self._grpc_configuration()
