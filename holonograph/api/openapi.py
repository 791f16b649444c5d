"""`GET /openapi.json`: the OpenAPI 3.1 document of every path the receiver's HTTP port
serves, generated from the models (pydantic's JSON Schema, 2020-12 as OpenAPI 3.1
uses it): each job's Request for its body, its report document for its answer, the
contract and change models for theirs, and the Guide's paths answered 501."""

from __future__ import annotations

from importlib import metadata
from typing import Any

from pydantic import TypeAdapter

from holonograph.api.endpoints import ENDPOINTS, NOT_SERVED
from ingest.edge.change_api import AVAILABILITY_PATH, CHANGES_PATH
from ingest.edge.contract_api import CONTRACT_PATH
from ingest.edge.http_server import TRACES_PATH
from ingest.edge.json_api import RUN_MODE_HEADER
from ingest.edge.steps import LOGS_SIGNAL
from schemas.changes import AvailabilityMark, ChangeEvent, ChangeRecord
from schemas.contracts import Contract, ContractSummary
from schemas.events import RUN_MODES

OPENAPI_PATH = "/openapi.json"
_REF = "#/components/schemas/{model}"

ENVELOPE = {
    "type": "object",
    "description": "The Guide's error envelope.",
    "properties": {
        "error": {"type": "string", "description": "What failed, for a person."},
        "code": {"type": "string", "description": "What failed, for a program."},
        "details": {"type": "object"},
    },
    "required": ["error", "code", "details"],
}
_ERRORS = {
    "400": "invalid JSON, body or run mode",
    "401": "no bearer token, or an unknown one",
    "403": "the token lacks the scope",
    "413": "the body is too large",
    "415": "the body is not application/json",
    "500": "internal error",
    "503": "busy or the store unavailable: retry after Retry-After",
}


def _errors(*extra: tuple[str, str]) -> dict[str, Any]:
    codes = {**_ERRORS, **dict(extra)}
    ref = {"$ref": "#/components/schemas/Error"}
    return {
        code: {"description": text, "content": {"application/json": {"schema": ref}}}
        for code, text in sorted(codes.items())
    }


def _json(schema: Any, description: str = "") -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _schemas() -> tuple[dict[tuple[str, str], Any], dict[str, Any]]:
    """Every body's and answer's schema, keyed (path, "request"|"response"), with
    their shared definitions."""
    inputs: list[tuple[tuple[str, str], Any, TypeAdapter[Any]]] = []
    for endpoint in ENDPOINTS:
        inputs.append(((endpoint.path, "request"), "validation", TypeAdapter(endpoint.job.request)))
        inputs.append(
            ((endpoint.path, "response"), "serialization", TypeAdapter(endpoint.job.document))
        )
    for key, model, mode in (
        ((CONTRACT_PATH, "request"), Contract, "validation"),
        ((CONTRACT_PATH, "response"), ContractSummary, "serialization"),
        ((CHANGES_PATH, "request"), ChangeRecord, "validation"),
        ((CHANGES_PATH, "response"), ChangeEvent, "serialization"),
        ((AVAILABILITY_PATH, "request"), AvailabilityMark, "validation"),
    ):
        inputs.append((key, mode, TypeAdapter(model)))
    schemas, definitions = TypeAdapter.json_schemas(inputs, by_alias=True, ref_template=_REF)
    by_key = {key: schema for (key, _mode), schema in schemas.items()}
    return by_key, dict(definitions.get("$defs", {}))


def _as_query(operation: dict[str, Any], request: Any, definitions: dict[str, Any]) -> None:
    """A GET endpoint takes its request's fields as query parameters, not a body."""
    del operation["requestBody"]
    ref = request.get("$ref", "")
    model = definitions[ref.rsplit("/", 1)[-1]] if ref else request
    required = set(model.get("required", ()))
    for name, schema in model.get("properties", {}).items():
        operation["parameters"].append(
            {
                "name": name,
                "in": "query",
                "required": name in required,
                "description": schema.get("description", ""),
                "schema": schema,
            }
        )


def document() -> dict[str, Any]:
    schemas, definitions = _schemas()
    bearer: list[dict[str, list[str]]] = [{"bearer": []}]
    run_mode = {
        "name": RUN_MODE_HEADER,
        "in": "header",
        "required": True,
        "description": "The run mode of the call (the Guide's run modes, fail-closed).",
        "schema": {"type": "string", "enum": sorted(RUN_MODES)},
    }
    paths: dict[str, dict[str, Any]] = {}
    for endpoint in ENDPOINTS:
        finding = {
            "description": "true: what the CLI's exit 1 says (a finding)",
            "schema": {"type": "string", "enum": ["true", "false"]},
        }
        answer = _json(schemas[(endpoint.path, "response")], "the CLI's --json document")
        answer["headers"] = {"x-holonograph-finding": finding}
        if endpoint.html is not None:
            answer["content"]["text/html"] = {
                "schema": {
                    "type": "string",
                    "description": "The report as one self-contained page (Accept: text/html).",
                }
            }
        paths.setdefault(endpoint.path, {})[endpoint.method.lower()] = {
            "summary": endpoint.summary,
            "description": f"The same job as `{endpoint.cli} --json`. Scope: {endpoint.scope}"
            + (f"; to persist also {endpoint.persist_scope}." if endpoint.persist_scope else "."),
            "operationId": endpoint.job.name,
            "security": bearer,
            "parameters": [run_mode],
            "requestBody": {
                "required": True,
                "content": {"application/json": {"schema": schemas[(endpoint.path, "request")]}},
            },
            "responses": {
                "200": answer,
                **_errors(
                    ("404", "what the request names does not exist"),
                    ("409", "conflicts with what is stored"),
                    ("422", "stopped by a read limit"),
                ),
            },
        }
        if endpoint.method == "GET":
            _as_query(paths[endpoint.path]["get"], schemas[(endpoint.path, "request")], definitions)
    for absent in NOT_SERVED:
        paths.setdefault(absent.path, {})[absent.method.lower()] = {
            "summary": "Named by the Guide; not served by this collector yet.",
            "operationId": f"notServed {absent.method} {absent.path}",
            "security": bearer,
            "parameters": [run_mode],
            "responses": {"501": _json({"$ref": "#/components/schemas/Error"}, "not served")},
        }
    _receiver_paths(paths, schemas, bearer, run_mode)
    paths[OPENAPI_PATH] = {
        "get": {
            "summary": "This document.",
            "operationId": "openapi",
            "security": [],
            "responses": {"200": _json({"type": "object"}, "OpenAPI 3.1")},
        }
    }
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "Holonograph collector",
            "version": metadata.version("holonograph-collector"),
            "description": "The Guide's endpoints this collector serves; docs/api.md.",
        },
        "paths": dict(sorted(paths.items())),
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
            "schemas": {"Error": ENVELOPE, **definitions},
        },
    }


def _receiver_paths(
    paths: dict[str, dict[str, Any]],
    schemas: dict[tuple[str, str], Any],
    bearer: list[dict[str, list[str]]],
    run_mode: dict[str, Any],
) -> None:
    """The paths `ingest` serves itself: OTLP (traces, logs), contracts, change events."""

    def otlp_export(summary: str, operation: str, answer: str) -> dict[str, Any]:
        return {
            "post": {
                "summary": f"{summary} Scope: write.",
                "operationId": operation,
                "security": bearer,
                "requestBody": {
                    "required": True,
                    "content": {
                        "application/x-protobuf": {},
                        "application/json": {"schema": {"type": "object"}},
                    },
                },
                "responses": {"200": {"description": answer}},
            }
        }

    paths[TRACES_PATH] = otlp_export(
        "OTLP/HTTP traces export (protobuf or JSON).", "otlpTraces", "ExportTraceServiceResponse"
    )
    paths[LOGS_SIGNAL.http_path] = otlp_export(
        "OTLP/HTTP logs export (protobuf or JSON): OpenTelemetry GenAI evaluation results"
        " (docs/genai.md); other log records are ignored.",
        "otlpLogs",
        "ExportLogsServiceResponse",
    )

    def json_call(summary: str, operation: str, body: Any | None, answer: Any) -> dict[str, Any]:
        call: dict[str, Any] = {
            "summary": summary,
            "operationId": operation,
            "security": bearer,
            "parameters": [run_mode],
            "responses": {"200": _json(answer), **_errors(("404", "not found"))},
        }
        if body is not None:
            call["requestBody"] = {
                "required": True,
                "content": {"application/json": {"schema": body}},
            }
        return call

    paths[CONTRACT_PATH] = {
        "post": json_call(
            "Register a surface contract (Guide ch. 2). Scope: govern.",
            "registerContract",
            schemas[(CONTRACT_PATH, "request")],
            schemas[(CONTRACT_PATH, "response")],
        ),
        "get": json_call(
            "The active contract of ?agentId= (Guide ch. 2). Scope: read or govern.",
            "readContract",
            None,
            schemas[(CONTRACT_PATH, "response")],
        ),
    }
    paths[CHANGES_PATH] = {
        "post": json_call(
            "Record a change (docs/changes.md). Scope: govern.",
            "recordChange",
            schemas[(CHANGES_PATH, "request")],
            schemas[(CHANGES_PATH, "response")],
        ),
        "get": json_call(
            "List changes. Scope: read or govern.", "listChanges", None, {"type": "object"}
        ),
    }
    paths[AVAILABILITY_PATH] = {
        "post": json_call(
            "The Guide's availability mark. Scope: write or govern.",
            "markAvailability",
            schemas[(AVAILABILITY_PATH, "request")],
            {"type": "object"},
        )
    }
