"""`GET /lens/events` and `POST /lens/topology/*` through one live `serve` with TLS and
bearer tokens (the module fixture of `test_api`): paging through events while ingest
runs returns every event exactly once, re-sends included; each body is the CLI's
`--json` for the same request; no token 401, a missing scope 403; another tenant's data
is never visible; a cursor is refused with another query."""

from __future__ import annotations

import json
import random
import threading
from collections import Counter
from urllib.parse import urlencode

import requests

from tests.holonograph.api.test_api import (
    GLOBEX,
    OPS,
    READER,
    SDK,
    Served,
    _documented,
    served,
)
from tests.otel_emit import BASE_NS, Dim, Evaluation, export_request, record_spans

__all__ = ["served"]  # the module-scoped live serve, one for this module

SURFACE = "paging"
BATCHES = 12
PER_BATCH = 9


def _events(served: Served, token: str | None = READER, **query: object) -> requests.Response:
    path = "/lens/events?" + urlencode({k: v for k, v in query.items() if v is not None})
    return served.call(path, token=token, method="GET")


def _ingest(served: Served, batch: list[Evaluation], seed: int) -> None:
    body = export_request(record_spans(batch, seed=seed)).SerializeToString()
    reply = requests.post(
        served.url + "/v1/traces", data=body, verify=str(served.ca_file), timeout=60,
        headers={"Content-Type": "application/x-protobuf", "Authorization": f"Bearer {SDK}"},
    )  # fmt: skip
    assert reply.status_code == 200, reply.text


def _batches(rng: random.Random) -> list[list[Evaluation]]:
    """New events on stream `paging-N`, and in every batch after the first re-sends of
    earlier ones: another timestamp, another grade, the same event id."""
    out: list[list[Evaluation]] = []
    sent: list[int] = []
    for b in range(BATCHES):
        batch = []
        for i in range(PER_BATCH):
            seq = b * PER_BATCH + i
            end = BASE_NS + rng.randrange(10**12)
            batch.append(Evaluation(f"{SURFACE}-{b}", i, surface=SURFACE,
                                    event_id=f"evt_paging_{seq}", end_ns=end))  # fmt: skip
            sent.append(seq)
        for seq in rng.sample(sent[: b * PER_BATCH], min(3, b * PER_BATCH)):
            batch.append(Evaluation(f"{SURFACE}-resend-{b}", seq, surface=SURFACE,
                                    event_id=f"evt_paging_{seq}",
                                    end_ns=BASE_NS + rng.randrange(10**12),
                                    dims=[Dim("correctness", passed=False)]))  # fmt: skip
        out.append(batch)
    return out


def _page_all(served: Served, cursor: str | None, seen: list[str], **query: object) -> str | None:
    """Page on from `cursor` until an empty page; the last cursor handed out."""
    while True:
        reply = _events(served, cursor=cursor, **query)
        assert reply.status_code == 200, reply.text
        page = reply.json()
        assert page["count"] == len(page["events"]) <= int(str(query["limit"]))
        seen += [e["eventId"] for e in page["events"]]
        if page["nextCursor"] is None:
            return cursor
        cursor = page["nextCursor"]


def test_paging_while_ingest_runs_returns_every_event_exactly_once(served: Served) -> None:
    batches = _batches(random.Random(25))
    _ingest(served, batches[0], seed=1)
    first_page = threading.Event()
    failures: list[BaseException] = []

    def ingest() -> None:
        try:
            first_page.wait(60)  # the rest arrives while the client pages
            for n, batch in enumerate(batches[1:], start=2):
                _ingest(served, batch, seed=n)
        except BaseException as err:  # reported by the test
            failures.append(err)

    writer = threading.Thread(target=ingest)
    writer.start()
    query = {"surfaceId": SURFACE, "direction": "asc", "limit": 4}
    seen: list[str] = []
    try:
        reply = _events(served, **query)
        assert reply.status_code == 200, reply.text
        seen += [e["eventId"] for e in reply.json()["events"]]
        cursor = reply.json()["nextCursor"]
        first_page.set()
        while writer.is_alive():
            cursor = _page_all(served, cursor, seen, **query)
    finally:
        first_page.set()
        writer.join(120)
    assert not failures, failures
    _page_all(served, cursor, seen, **query)  # what arrived after the last page

    expected = {f"evt_paging_{n}" for n in range(BATCHES * PER_BATCH)}
    assert [e for e, n in Counter(seen).items() if n > 1] == []  # no re-send twice
    assert set(seen) == expected  # none skipped
    # Newest first, from the top, after ingest: each once, the latest versions.
    latest: list[str] = []
    _page_all(served, None, latest, surfaceId=SURFACE, limit=10)
    assert latest == list(reversed(seen))


def test_the_body_is_the_clis_json_for_the_same_request(served: Served) -> None:
    query = {"surfaceId": "classify-intent", "since": "2026-07-01", "until": "2026-07-02",
             "limit": 2, "direction": "asc", "provenance": "all"}  # fmt: skip
    flags = ["--surface", "classify-intent", "--since", "2026-07-01T00:00:00Z",
             "--until", "2026-07-02T00:00:00Z", "--limit", "2", "--direction", "asc",
             "--provenance", "all"]  # fmt: skip
    first = _events(served, **query)
    assert first.status_code == 200, first.text
    assert first.headers["x-holonograph-finding"] == "false"
    assert first.json() == served.cli("events", *flags)
    assert [e["eventId"] for e in first.json()["events"]] == ["e1", "e2"]
    cursor = first.json()["nextCursor"]
    second = _events(served, cursor=cursor, **query)
    assert second.json() == served.cli("events", *flags, "--cursor", cursor)
    assert [e["eventId"] for e in second.json()["events"]] == ["e3"]
    event = second.json()["events"][0]
    assert (event["surfaceId"], event["provenance"]) == ("classify-intent", "production-state")
    # production-state is the default, exploratory-state filters the others
    assert _events(served, surfaceId="classify-intent", provenance="exploratory-state",
                   limit=5).json()["count"] == 0  # fmt: skip


def test_no_token_401_no_read_scope_403(served: Served) -> None:
    assert _events(served, token=None, limit=1).status_code == 401
    refused = _events(served, token=SDK, limit=1)  # write and govern, no read
    assert (refused.status_code, refused.json()["details"]["required"]) == (403, ["read"])
    assert _events(served, token=OPS, limit=1).status_code == 200


def test_another_tenants_events_are_never_visible(served: Served) -> None:
    theirs = _events(served, token=GLOBEX, provenance="all", limit=1000, direction="asc")
    assert [e["eventId"] for e in theirs.json()["events"]] == ["g1"]
    # acme's cursor gives globex the page after that place among globex's events only
    mine = _events(served, surfaceId="classify-intent", limit=1, direction="asc")
    cursor = mine.json()["nextCursor"]
    after = _events(served, token=GLOBEX, surfaceId="classify-intent", limit=1,
                    direction="asc", cursor=cursor)  # fmt: skip
    assert {e["eventId"] for e in after.json()["events"]} <= {"g1"}


def test_bad_queries_and_foreign_cursors_are_refused(served: Served) -> None:
    def code(reply: requests.Response) -> tuple[int, str]:
        assert set(reply.json()) == {"error", "code", "details"}
        return reply.status_code, reply.json()["code"]

    assert code(_events(served, cursor="cur_nonsense")) == (400, "invalid_cursor")
    cursor = _events(served, surfaceId="classify-intent", limit=1).json()["nextCursor"]
    moved = _events(served, surfaceId="other", limit=1, cursor=cursor)
    assert code(moved) == (400, "cursor_mismatch")
    assert code(_events(served, limit=0)) == (400, "invalid_request")
    assert code(_events(served, provenance="any")) == (400, "invalid_request")
    assert code(_events(served, since="2026-07-02", until="2026-07-01")) == (400, "invalid_request")
    twice = served.call("/lens/events?limit=1&limit=2", token=READER, method="GET")
    assert code(twice) == (400, "invalid_request")
    assert code(served.call("/lens/events", token=READER, method="GET", run_mode=None)) == (
        400, "run_mode_missing",
    )  # fmt: skip


# --- topology ---------------------------------------------------------------------------

CONTRACT = {"agentId": "billing-triage", "surfaces": [{"id": "classify-intent"}]}
INVENTORY = {"agentId": "billing-triage", "consumerId": "billing-triage-agent",
             "inventoryKind": "surface-ids", "surfaceIds": ["classify-intent", "escalate"],
             "capturedAt": "2026-07-01T00:00:00Z"}  # fmt: skip
WINDOW = {"since": "2026-07-01", "until": "2026-07-02"}
WINDOW_FLAGS = ["--since", "2026-07-01T00:00:00Z", "--until", "2026-07-02T00:00:00Z"]
PER_SCAN = ("scanId", "scannedAt")


def _scan_run(document: dict[str, object]) -> dict[str, object]:
    return {k: v for k, v in document.items() if k not in PER_SCAN}


def test_topology_answers_the_clis_json_and_needs_govern_to_write(served: Served) -> None:
    assert served.call("/holonograph/contract", CONTRACT).status_code == 200
    refused = served.call("/lens/topology/structural-inventory", INVENTORY, token=READER)
    assert (refused.status_code, refused.json()["details"]["required"]) == (403, ["govern"])
    posted = served.call("/lens/topology/structural-inventory", INVENTORY)
    assert posted.status_code == 200, posted.text
    assert posted.json()["created"] is True and posted.json()["inventoryId"].startswith("inv_")
    body = served.data_dir.parent / "inventory.json"
    body.write_text(json.dumps(INVENTORY))
    # the CLI posting the same inventory finds it stored: the same answer, not created
    assert served.cli("topology", "inventory", str(body)) == {**posted.json(), "created": False}
    again = served.call("/lens/topology/structural-inventory", INVENTORY)
    assert again.json() == {**posted.json(), "created": False}

    scan = {"agentId": "billing-triage", **WINDOW}
    scanned = served.call("/lens/topology/scan", scan, token=READER)
    assert scanned.status_code == 200, scanned.text
    cli_scan = served.cli("topology", "scan", "--agent", "billing-triage", *WINDOW_FLAGS)
    assert _scan_run(scanned.json()) == _scan_run(cli_scan)
    assert scanned.json()["inventories"][0]["inventoryId"] == posted.json()["inventoryId"]
    assert scanned.json()["inventoryOnlySurfaces"]["examples"] == ["escalate"]
    assert scanned.headers["x-holonograph-finding"] == "true"  # a gap: the gate fails
    assert scanned.json()["recorded"] is False
    record = served.call("/lens/topology/scan", {**scan, "record": True}, token=READER)
    assert (record.status_code, record.json()["details"]["required"]) == (403, ["govern"])
    recorded = served.call("/lens/topology/scan", {**scan, "record": True})
    assert recorded.status_code == 200 and recorded.json()["recorded"] is True

    proposal = {"surfaceId": "classify-intent", **WINDOW}
    proposed = served.call("/lens/topology/bootstrap", proposal, token=READER)
    assert proposed.status_code == 200, proposed.text
    assert proposed.json() == served.cli(
        "topology", "bootstrap", "--surface", "classify-intent", *WINDOW_FLAGS
    )
    assert (proposed.json()["tenantId"], proposed.json()["events"]) == ("acme", 3)
    _documented("/lens/topology/scan", scanned.json())
    _documented("/lens/topology/bootstrap", proposed.json())


def test_topology_sees_the_tokens_tenant_only(served: Served) -> None:
    served.call("/holonograph/contract", CONTRACT)  # acme's contract
    theirs = served.call("/lens/topology/scan", {"agentId": "billing-triage", **WINDOW},
                         token=GLOBEX)  # fmt: skip
    assert theirs.status_code == 200, theirs.text
    assert theirs.json()["tenantId"] == "globex"
    assert theirs.json()["contractVersionId"] is None and theirs.json()["inventories"] == []
    proposed = served.call("/lens/topology/bootstrap", {"surfaceId": "classify-intent",
                                                        **WINDOW}, token=GLOBEX)  # fmt: skip
    assert (proposed.json()["tenantId"], proposed.json()["events"]) == ("globex", 1)
    none = served.call("/lens/topology/bootstrap", {"surfaceId": "nothing-here", **WINDOW},
                       token=GLOBEX)  # fmt: skip
    assert (none.status_code, none.json()["code"]) == (404, "unknown_surface")  # never seen
    quiet = served.call("/lens/topology/bootstrap", {"surfaceId": "classify-intent",
                                                     "since": "2026-01-01", "until": "2026-01-02"},
                        token=GLOBEX)  # fmt: skip
    assert (quiet.status_code, quiet.json()["code"]) == (404, "no_events")  # known, not then
    backwards = served.call("/lens/topology/scan", {"agentId": "a", "since": "2026-07-02",
                                                   "until": "2026-07-01"})  # fmt: skip
    assert (backwards.status_code, backwards.json()["code"]) == (400, "invalid_request")
    assert served.call("/lens/topology/scan", {"agentId": "a"}, token=None).status_code == 401


# --- quarantine -------------------------------------------------------------------------


def test_quarantine_answers_the_clis_json_for_the_tokens_tenant(served: Served) -> None:
    rejected = [Evaluation("rejects", n, run_mode=None, event_id=f"evt_rej_{n}") for n in range(3)]
    _ingest(served, rejected, seed=99)  # no run mode: quarantined, fail-closed
    request = {"reasonPrefix": "holonograph.run_mode", "limit": 2}
    answer = served.call("/holonograph/quarantine", request, token=READER)
    assert answer.status_code == 200, answer.text
    assert answer.headers["x-holonograph-finding"] == "false"
    assert answer.json() == served.cli("quarantine", "--reason-prefix", "holonograph.run_mode",
                                       "--limit", "2")  # fmt: skip
    assert answer.json()["total"] == 3 and len(answer.json()["spans"]) == 2
    assert {s["tenantId"] for s in answer.json()["spans"]} == {"acme"}
    theirs = served.call("/holonograph/quarantine", request, token=GLOBEX)
    assert (theirs.json()["tenantId"], theirs.json()["total"]) == ("globex", 0)
    assert served.call("/holonograph/quarantine", request, token=SDK).status_code == 403
    backwards = served.call("/holonograph/quarantine", {"since": "2026-07-02",
                                                        "until": "2026-07-01"})  # fmt: skip
    assert (backwards.status_code, backwards.json()["code"]) == (400, "invalid_request")


# --- compare ----------------------------------------------------------------------------


def test_compare_answers_the_clis_json_for_the_tokens_tenant(served: Served) -> None:
    request = {"surfaceId": "classify-intent", **WINDOW, "provenances": ["all"]}
    answer = served.call("/holonograph/compare", request, token=READER)
    assert answer.status_code == 200, answer.text
    assert answer.json() == served.cli(
        "compare", "--surface", "classify-intent", *WINDOW_FLAGS, "--provenance", "any"
    )
    assert (answer.json()["tenantId"], answer.json()["events"]) == ("acme", 3)
    assert answer.headers["x-holonograph-finding"] == "false"
    theirs = served.call("/holonograph/compare", request, token=GLOBEX)
    assert (theirs.json()["tenantId"], theirs.json()["events"]) == ("globex", 1)
    assert served.call("/holonograph/compare", request, token=SDK).status_code == 403
    bad = served.call("/holonograph/compare", {**request, "by": "colour"})
    assert (bad.status_code, bad.json()["code"]) == (400, "invalid_request")
    assert "by must be light-source" in bad.json()["error"]
