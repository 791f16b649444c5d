"""Bearer-token authentication and per-tenant rate limits through the real transports:
no token or an unknown one is 401 / UNAUTHENTICATED with nothing stored, a valid
token's rows land with its Principal, the tokens file is reloaded on change (a bad
new file keeps the old tokens), and a tenant over its spans per second gets 429 /
RESOURCE_EXHAUSTED with a retry delay."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
import requests

from ingest.edge.auth import Authenticator, TokensFileError, load_tokens
from ingest.export.decode import parse_protobuf
from ingest.export.principal import ANONYMOUS, Principal
from ingest.store.clickhouse import ClickHouseStore
from tests.conftest import RunningReceiver
from tests.e2e.kafka.helpers import wait_until
from tests.ingest.helpers import EXPORT, GrpcReply, http_export, http_status
from tests.otel_emit import Evaluation, export_grpc, export_http, export_request, record_spans

TOKEN_A = "tok-acme-0123456789"
TOKEN_B = "tok-globex-9876543210"


def tokens_yaml(*entries: str) -> str:
    return "tokens:\n" + "".join(entries)


def entry(tenant: str, secret: str, hashed: bool = True, extra: str = "") -> str:
    key = (
        f'token_sha256: "{hashlib.sha256(secret.encode()).hexdigest()}"'
        if hashed
        else f'token: "{secret}"'
    )
    return f'  - name: {tenant}-prod\n    tenant: {tenant}\n    {key}\n    agents: "*"\n{extra}'


@pytest.fixture
def tokens_file(tmp_path: Path) -> Path:
    path = tmp_path / "tokens.yaml"
    path.write_text(
        tokens_yaml(
            entry("acme", TOKEN_A, extra="    spans_per_second: 1\n"),
            entry("globex", TOKEN_B, hashed=False),
        )
    )
    path.chmod(0o600)
    return path


@pytest.fixture
def auth_receiver(store: ClickHouseStore, tokens_file: Path) -> Iterator[RunningReceiver]:
    running = RunningReceiver(store, auth_tokens_file=tokens_file, reload_interval_seconds=0.05)
    yield running
    running.stop()


def grpc_call(endpoint: str, payload: bytes, token: str | None) -> GrpcReply:
    metadata = (("authorization", f"Bearer {token}"),) if token else ()
    with grpc.insecure_channel(endpoint) as channel:
        try:
            body, state = channel.unary_unary(EXPORT).with_call(
                payload, timeout=30, metadata=metadata
            )
            return GrpcReply(grpc.StatusCode.OK, "", body, state.trailing_metadata())
        except grpc.RpcError as err:
            return GrpcReply(err.code(), err.details(), None, err.trailing_metadata())


def http_call(endpoint: str, payload: bytes, token: str | None) -> requests.Response:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return http_export(endpoint, payload, headers=headers)


def payload_of(stream: str, spans: int = 2) -> bytes:
    items = [Evaluation(stream, seq) for seq in range(spans)]
    return export_request(record_spans(items)).SerializeToString()


def stored(receiver: RunningReceiver, stream: str) -> int:
    return int(
        receiver.store.query(
            "SELECT count() FROM holonograph.emission_receipts WHERE emission_stream = {s:String}",
            {"s": stream},
        ).scalar()
    )


def metric(receiver: RunningReceiver, line_start: str) -> float:
    text = requests.get(f"{receiver.admin_endpoint}/metrics", timeout=10).text
    for line in text.splitlines():
        if line.startswith(line_start):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


# --- the tokens file ---------------------------------------------------------------


def test_tokens_file_holds_hashes_or_tokens_and_yields_principals(tokens_file: Path) -> None:
    principals = {p.tenant_id: (digest, p) for digest, p in load_tokens(tokens_file)}
    digest, acme = principals["acme"]
    assert digest == hashlib.sha256(TOKEN_A.encode()).digest()
    assert acme == Principal("acme", None, "acme-prod", 1.0)
    assert principals["globex"][0] == hashlib.sha256(TOKEN_B.encode()).digest()


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("tokens: [", "is not YAML"),
        ("tokens: []", "tokens: List should have at least 1 item"),
        ("tokens:\n  - tenant: a\n    agents: '*'\n", "give exactly one of token and token_sha256"),
        (
            "tokens:\n  - tenant: a\n    token: x\n    token_sha256: '" + "0" * 64 + "'\n"
            "    agents: '*'\n",
            "give exactly one",
        ),
        ("tokens:\n  - tenant: a\n    token_sha256: 'xyz'\n    agents: '*'\n", "token_sha256"),
        ("tokens:\n  - tenant: a\n    token: x\n", "tokens.0.agents: Field required"),
        # An unknown key is not quoted (it may be a token pasted in the wrong place).
        (
            "tokens:\n  - tenant: a\n    token: x\n    agents: '*'\n    role: admin\n",
            "unknown field",
        ),
        (
            "tokens:\n  - tenant: a\n    token: x\n    agents: '*'\n    spans_per_secnd: 5\n",
            "tokens.0.…: unknown field (did you mean spans_per_second?)",
        ),
        (
            tokens_yaml(
                entry("a", "one", extra="    spans_per_second: 5\n"),
                entry("a", "two", extra="    spans_per_second: 6\n"),
            ),
            "entries of tenant 'a' disagree on spans_per_second",
        ),
        (
            tokens_yaml(entry("a", "same"), entry("b", "same", hashed=False)),
            "a token appears twice",
        ),
    ],
)
def test_a_bad_tokens_file_says_what_is_wrong(tmp_path: Path, text: str, problem: str) -> None:
    path = tmp_path / "tokens.yaml"
    path.write_text(text)
    with pytest.raises(TokensFileError, match="tokens file") as err:
        load_tokens(path)
    assert problem in str(err.value)


def test_without_a_tokens_file_everyone_is_anonymous() -> None:
    assert Authenticator(None).authenticate(None) is ANONYMOUS
    assert Authenticator(None).authenticate("Bearer whatever") is ANONYMOUS


# --- through the transports ----------------------------------------------------------


@pytest.mark.e2e
@pytest.mark.clickhouse
def test_missing_or_unknown_token_is_refused_and_nothing_is_stored(
    auth_receiver: RunningReceiver, caplog: pytest.LogCaptureFixture
) -> None:
    payload = payload_of("intruder")
    for token in (None, "not-a-token", ""):
        reply = grpc_call(auth_receiver.grpc_endpoint, payload, token)
        assert reply.code is grpc.StatusCode.UNAUTHENTICATED
        assert reply.retry_delay() is None
        answer = http_call(auth_receiver.http_endpoint, payload, token)
        assert answer.status_code == 401
        assert answer.headers["WWW-Authenticate"] == "Bearer"
        assert "Retry-After" not in answer.headers
        assert "bearer token" in http_status(answer).message
    basic = http_export(
        auth_receiver.http_endpoint, payload, headers={"Authorization": f"Basic {TOKEN_A}"}
    )
    assert basic.status_code == 401
    assert stored(auth_receiver, "intruder") == 0
    assert metric(auth_receiver, 'holonograph_auth_failures_total{reason="missing"}') == 5
    assert metric(auth_receiver, 'holonograph_auth_failures_total{reason="unknown"}') == 2
    # One line for the burst (rate-limited), never the token.
    refusals = [r for r in caplog.records if "refused an OTLP request" in r.getMessage()]
    assert len(refusals) == 1
    assert "not-a-token" not in caplog.text and TOKEN_A not in caplog.text


@pytest.mark.e2e
@pytest.mark.clickhouse
def test_a_valid_token_stores_rows_with_its_principal(auth_receiver: RunningReceiver) -> None:
    exporter = auth_receiver.service._exporter
    assert exporter is not None
    seen: list[Principal] = []
    original = exporter.export

    async def spy(request: Any, size: int, principal: Principal = ANONYMOUS, **more: Any) -> Any:
        seen.append(principal)
        wire = more.get("wire")  # the bytes it was parsed from, for the hot path
        assert isinstance(wire, bytes) and parse_protobuf(wire) == request
        return await original(request, size, principal, **more)

    exporter.export = spy  # type: ignore[method-assign]
    spans = record_spans([Evaluation("globex-otel", 0), Evaluation("globex-otel", 1)])
    headers = {"authorization": f"Bearer {TOKEN_B}"}
    assert export_grpc(auth_receiver.grpc_endpoint, spans, headers=headers).name == "SUCCESS"
    assert export_http(auth_receiver.http_endpoint, spans, headers=headers).name == "SUCCESS"
    assert stored(auth_receiver, "globex-otel") == 4
    assert [p.tenant_id for p in seen] == ["globex", "globex"]
    assert seen[0].name == "globex-prod"


@pytest.mark.e2e
@pytest.mark.clickhouse
def test_tokens_file_is_reloaded_and_a_bad_one_keeps_the_old_tokens(
    auth_receiver: RunningReceiver, tokens_file: Path, caplog: pytest.LogCaptureFixture
) -> None:
    endpoint = auth_receiver.grpc_endpoint
    assert grpc_call(endpoint, payload_of("r0"), TOKEN_B).code is grpc.StatusCode.OK
    tokens_file.write_text("tokens: [")  # an editor's half-written save
    wait_until(lambda: "keeping the old tokens" in caplog.text, what="refused reload")
    assert grpc_call(endpoint, payload_of("r1"), TOKEN_B).code is grpc.StatusCode.OK

    # Replaced whole, as a careful deploy does: a reload never sees it half-written.
    replacement = tokens_file.with_name("tokens.yaml.new")
    replacement.write_text(tokens_yaml(entry("initech", "tok-new-token-0001")))
    replacement.chmod(0o600)
    replacement.replace(tokens_file)

    def new_token_works() -> bool:
        return grpc_call(endpoint, b"", "tok-new-token-0001").code is grpc.StatusCode.OK

    wait_until(new_token_works, what="new tokens in use")
    assert grpc_call(endpoint, payload_of("r2"), TOKEN_B).code is grpc.StatusCode.UNAUTHENTICATED
    assert stored(auth_receiver, "r1") == 2 and stored(auth_receiver, "r2") == 0
    assert caplog.text.count("keeping the old tokens") == 1  # said once per bad version


@pytest.mark.e2e
@pytest.mark.clickhouse
def test_a_tenant_over_its_rate_limit_gets_a_retry_delay(auth_receiver: RunningReceiver) -> None:
    # acme may send 1 span per second: a 10-span request passes on a full bucket and
    # leaves a debt of 9 spans, so the next one must wait about 10 seconds.
    first = grpc_call(auth_receiver.grpc_endpoint, payload_of("acme-0", 10), TOKEN_A)
    assert first.code is grpc.StatusCode.OK
    limited = grpc_call(auth_receiver.grpc_endpoint, payload_of("acme-1", 10), TOKEN_A)
    assert limited.code is grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "rate limit of 1 spans/s" in limited.details
    delay = limited.retry_delay()
    assert delay is not None and 8.0 < delay <= 10.0
    answer = http_call(auth_receiver.http_endpoint, payload_of("acme-2", 10), TOKEN_A)
    assert answer.status_code == 429
    assert 9 <= int(answer.headers["Retry-After"]) <= 10
    assert math.isclose(stored(auth_receiver, "acme-0"), 10)
    assert stored(auth_receiver, "acme-1") == 0 and stored(auth_receiver, "acme-2") == 0
    # Another tenant is not held back by acme's limit.
    other = grpc_call(auth_receiver.grpc_endpoint, payload_of("globex-1", 10), TOKEN_B)
    assert other.code is grpc.StatusCode.OK


# --- scopes ------------------------------------------------------------------------

TOKEN_READER = "tok-acme-reader-000111"


def test_scopes_default_to_what_tokens_could_do_before_them(tmp_path: Path) -> None:
    path = tmp_path / "scoped.yaml"
    path.write_text(
        tokens_yaml(
            entry("acme", TOKEN_A),
            entry("acme", TOKEN_READER, extra="    scopes: [read]\n").replace(
                "acme-prod", "acme-reader"
            ),
        )
    )
    path.chmod(0o600)
    scopes = {p.name: p.scopes for _, p in load_tokens(path)}
    assert scopes == {"acme-prod": {"write", "govern"}, "acme-reader": {"read"}}
    assert ANONYMOUS.scopes == {"write", "read", "govern"}  # no tokens file: one tenant
    path.write_text(tokens_yaml(entry("acme", TOKEN_A, extra="    scopes: [admin]\n")))
    with pytest.raises(TokensFileError, match="scopes"):
        load_tokens(path)
    path.write_text(tokens_yaml(entry("acme", TOKEN_A, extra="    scopes: []\n")))
    with pytest.raises(TokensFileError, match="scopes"):
        load_tokens(path)


def test_a_token_without_the_write_scope_exports_nothing(
    store: ClickHouseStore, tmp_path: Path
) -> None:
    path = tmp_path / "tokens.yaml"
    reader = entry("acme", TOKEN_READER, extra="    scopes: [read, govern]\n")
    path.write_text(tokens_yaml(entry("acme", TOKEN_A), reader.replace("acme-prod", "acme-r")))
    path.chmod(0o600)
    receiver = RunningReceiver(store, auth_tokens_file=path)
    try:
        refused_grpc = grpc_call(receiver.grpc_endpoint, payload_of("scoped-g"), TOKEN_READER)
        refused_http = http_call(receiver.http_endpoint, payload_of("scoped-h"), TOKEN_READER)
        written = http_call(receiver.http_endpoint, payload_of("scoped-w"), TOKEN_A)
    finally:
        receiver.stop()
    assert refused_grpc.code is grpc.StatusCode.PERMISSION_DENIED
    assert "add `write`" in refused_grpc.details
    assert refused_http.status_code == 403
    assert "may not write OTLP data" in http_status(refused_http).message
    assert written.status_code == 200
    assert (stored(receiver, "scoped-g"), stored(receiver, "scoped-h")) == (0, 0)
    assert stored(receiver, "scoped-w") == 2
