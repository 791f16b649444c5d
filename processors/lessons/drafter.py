"""The drafter: a cluster in, a concrete corrective artifact out.

`Drafter` is the interface: `draft(kind, cluster)` returns the artifact's content for
one of the four kinds (the Guide's chapter 12). `TemplateDrafter` ships: deterministic,
no model, every sentence built from the cluster's own tags, failed dimensions,
rationales and examples. A model-backed drafter implements the same method (and its
own model call passes through the lens like any other: docs/lessons.md).

A fixture's content here is its prose rule (and the tools it names); the draft job
turns the rule into a conformance fixture with the derive step and checks it on the
seed event before offering it.
"""

from __future__ import annotations

import re
from typing import Any, Literal, Protocol

Kind = Literal["skill", "lesson", "fixture", "code-change-recommendation"]
KINDS: tuple[Kind, ...] = ("skill", "lesson", "fixture", "code-change-recommendation")
_TOOL_TAG = re.compile(r"^tool=([A-Za-z_][A-Za-z0-9_.-]*)$")


class Drafter(Protocol):
    name: str

    def draft(self, kind: Kind, cluster: dict[str, Any]) -> dict[str, Any]:
        """The artifact's content for `cluster` (its document, `summary` inside)."""
        ...


def tools_of(summary: dict[str, Any]) -> list[str]:
    """The tools a cluster's tags name (`tool=refund_lookup`)."""
    return sorted({m[1] for t in summary.get("tags", []) if (m := _TOOL_TAG.match(t))})


def _pattern(summary: dict[str, Any]) -> str:
    parts = [f"{summary['size']} override(s) of {summary['surfaceId']}"]
    if summary.get("failedDimensions"):
        parts.append(f"whose calls failed {', '.join(summary['failedDimensions'])}")
    if summary.get("tags"):
        parts.append(f"tagged {', '.join(summary['tags'])}")
    terms = [t for t in summary.get("topTerms", []) if not t.startswith(("+", "-"))]
    if terms:
        parts.append(f"about {', '.join(terms[:5])}")
    return " ".join(parts)


def _instruction(summary: dict[str, Any]) -> str:
    tools = tools_of(summary)
    if tools:
        return f"Invoke the {' and '.join(tools)} tool before responding."
    if summary.get("failedDimensions"):
        return f"The {summary['failedDimensions'][0]} dimension must pass."
    rationales = summary.get("representativeRationales") or []
    return rationales[0] if rationales else "Follow the corrected outputs of the examples."


class TemplateDrafter:
    """Deterministic drafts from a cluster's own evidence."""

    name = "template/v1"

    def draft(self, kind: Kind, cluster: dict[str, Any]) -> dict[str, Any]:
        summary = cluster["summary"]
        examples = [
            {"before": e["originalOutput"], "after": e["correctedOutput"], "why": e["rationale"]}
            for e in summary.get("examples", [])
        ]
        evidence = {
            "clusterId": cluster["clusterId"],
            "overrideIds": cluster["memberIds"],
            "failedDimensions": summary.get("failedDimensions", []),
            "rationales": summary.get("representativeRationales", []),
        }
        if kind == "lesson":
            return {
                "title": f"Lesson: {_instruction(summary)}",
                "pattern": _pattern(summary),
                "instruction": _instruction(summary),
                "examples": examples,
                "evidence": evidence,
            }
        if kind == "skill":
            return {
                "name": f"{summary['surfaceId']}-{cluster['clusterId'][-8:]}",
                "description": _pattern(summary),
                "instruction": _instruction(summary),
                "tools": tools_of(summary),
                "examples": examples,
                "evidence": evidence,
            }
        if kind == "code-change-recommendation":
            tier, surface = summary.get("fixTier"), summary["surfaceId"]
            return {
                "fixTier": tier,
                "change": (
                    f"Change the {tier} of {surface}: {_instruction(summary)}"
                    if tier
                    else f"No fix tier is tagged; review {surface}: {_instruction(summary)}"
                ),
                "evidence": evidence,
            }
        return {
            "rule": _instruction(summary),
            "tools": tools_of(summary),
            "pattern": _pattern(summary),
            "evidence": evidence,
        }


DEFAULT_DRAFTER: Drafter = TemplateDrafter()
