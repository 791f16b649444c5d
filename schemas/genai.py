"""OpenTelemetry GenAI evaluation results, and the contract block that maps them.

The vocabulary is the OpenTelemetry GenAI semantic conventions' (event
`gen_ai.evaluation.result`, the `gen_ai.*` attribute registry, resource
`deployment.environment.name`), spelled once here; nothing is invented beside it.
GenAI telemetry names no Holonograph surface and no run mode, so a contract's `genai`
block says where its agent's results go (`GenAIMapping`): which surface a result lands
on (by `gen_ai.agent.name`, `gen_ai.operation.name`, resource `service.name`), which
run mode a deployment environment is, and which score labels count as a pass. See
`docs/genai.md`.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator
from pydantic.alias_generators import to_camel

from schemas.events import GENAI_RESULT, RunMode

# The event (a span event, or a log record's event name) and, as some producers emit
# it, a span of its own name holding the same attributes.
EVALUATION_RESULT = GENAI_RESULT
# Before OTLP logs had `event_name`, SDKs wrote the event's name in this attribute.
LEGACY_EVENT_NAME = "event.name"

EVALUATION_NAME = "gen_ai.evaluation.name"
SCORE_VALUE = "gen_ai.evaluation.score.value"
SCORE_LABEL = "gen_ai.evaluation.score.label"
EXPLANATION = "gen_ai.evaluation.explanation"
RESPONSE_ID = "gen_ai.response.id"
ERROR_TYPE = "error.type"

AGENT_NAME = "gen_ai.agent.name"
OPERATION_NAME = "gen_ai.operation.name"
PROVIDER_NAME = "gen_ai.provider.name"
REQUEST_MODEL = "gen_ai.request.model"
RESPONSE_MODEL = "gen_ai.response.model"
INPUT_TOKENS = "gen_ai.usage.input_tokens"
OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
SERVICE_NAME = "service.name"
DEPLOYMENT_ENVIRONMENT = "deployment.environment.name"
SDK_NAME = "telemetry.sdk.name"
SDK_VERSION = "telemetry.sdk.version"

# Deprecated names the conventions replaced, read only where the new one is absent.
DEPRECATED = {
    PROVIDER_NAME: "gen_ai.system",
    INPUT_TOKENS: "gen_ai.usage.prompt_tokens",
    OUTPUT_TOKENS: "gen_ai.usage.completion_tokens",
    DEPLOYMENT_ENVIRONMENT: "deployment.environment",
}

# Every attribute a rejection's reason may name first (metrics label reasons by it).
ATTRIBUTES = frozenset(
    {
        EVALUATION_RESULT,
        EVALUATION_NAME,
        SCORE_VALUE,
        SCORE_LABEL,
        EXPLANATION,
        RESPONSE_ID,
        ERROR_TYPE,
        AGENT_NAME,
        OPERATION_NAME,
        PROVIDER_NAME,
        REQUEST_MODEL,
        RESPONSE_MODEL,
        INPUT_TOKENS,
        OUTPUT_TOKENS,
        DEPLOYMENT_ENVIRONMENT,
        *DEPRECATED.values(),
    }
)

# `deployment.environment.name` -> run mode when a contract gives no table of its own:
# the conventions' well-known values whose meaning is plain. `staging` is not among
# them: whether it is a test or production-like state is the operator's to say.
DEFAULT_RUN_MODES: dict[str, RunMode] = {
    "production": "production",
    "test": "test",
    "development": "local_dev",
}

Name = Annotated[str, StringConstraints(min_length=1, max_length=256)]
Label = Annotated[str, StringConstraints(min_length=1, max_length=256)]
MAX_RULES = 1000


class _Model(BaseModel):
    model_config = ConfigDict(
        extra="forbid", frozen=True, populate_by_name=True, alias_generator=to_camel
    )


def _unique(values: tuple[str, ...], what: str) -> None:
    seen: set[str] = set()
    for value in values:
        if value in seen:
            raise ValueError(f"{what}: {value!r} twice")
        seen.add(value)


class GenAISurface(_Model):
    """Results of operations matching every given field land on `surfaceId` (a surface
    of the contract). At least one field: a rule matching everything would place
    another agent's traffic on this one's surface."""

    surface_id: Name
    agent_name: Name | None = None
    operation_name: Name | None = None
    service_name: Name | None = None

    @model_validator(mode="after")
    def _matches_something(self) -> GenAISurface:
        if self.agent_name is None and self.operation_name is None and self.service_name is None:
            raise ValueError(
                f"surface {self.surface_id}: give at least one of agentName, operationName,"
                " serviceName"
            )
        return self

    def matches(self, agent_name: str, operation_name: str, service_name: str) -> bool:
        return (
            (self.agent_name is None or self.agent_name == agent_name)
            and (self.operation_name is None or self.operation_name == operation_name)
            and (self.service_name is None or self.service_name == service_name)
        )

    def describe(self) -> str:
        given = [
            f"{key} {value!r}"
            for key, value in (
                ("agentName", self.agent_name),
                ("operationName", self.operation_name),
                ("serviceName", self.service_name),
            )
            if value is not None
        ]
        return f"surface {self.surface_id} ({', '.join(given)})"


class LabelRule(_Model):
    """Which `gen_ai.evaluation.score.label` values are a pass; with `failLabels`, which
    are a fail, and any other label is refused (without it, every other label fails)."""

    pass_labels: tuple[Label, ...] = Field(min_length=1, max_length=MAX_RULES)
    fail_labels: tuple[Label, ...] | None = Field(default=None, min_length=1, max_length=MAX_RULES)

    @model_validator(mode="after")
    def _disjoint(self) -> LabelRule:
        _unique(self.pass_labels, "passLabels")
        _unique(self.fail_labels or (), "failLabels")
        both = set(self.pass_labels) & set(self.fail_labels or ())
        if both:
            raise ValueError(f"labels both pass and fail: {', '.join(sorted(both))}")
        return self

    def passed(self, label: str) -> bool | None:
        """True or False for a label the rule knows; None for one it refuses."""
        if label in self.pass_labels:
            return True
        if self.fail_labels is None or label in self.fail_labels:
            return False
        return None

    def describe(self) -> str:
        text = f"pass: {', '.join(self.pass_labels)}"
        if self.fail_labels is not None:
            text += f"; fail: {', '.join(self.fail_labels)}"
        return text


class EvaluationLabels(LabelRule):
    """The label rule of one evaluation (`gen_ai.evaluation.name`), over the block's."""

    name: Name


class GenAIMapping(_Model):
    """A contract's `genai` block: how its agent's GenAI evaluation results become
    evaluation events. `runModes` replaces the default table (`DEFAULT_RUN_MODES`);
    `labels` is the block's label rule, `evaluations[]` one per evaluation name."""

    surfaces: tuple[GenAISurface, ...] = Field(min_length=1, max_length=MAX_RULES)
    run_modes: dict[Name, RunMode] | None = Field(default=None, min_length=1)
    labels: LabelRule | None = None
    evaluations: tuple[EvaluationLabels, ...] = Field(default=(), max_length=MAX_RULES)

    @model_validator(mode="after")
    def _unique_evaluations(self) -> GenAIMapping:
        _unique(tuple(e.name for e in self.evaluations), "evaluations[].name")
        return self

    def run_mode_table(self) -> dict[str, RunMode]:
        return dict(self.run_modes) if self.run_modes is not None else dict(DEFAULT_RUN_MODES)

    def label_rule(self, evaluation: str) -> LabelRule | None:
        """The rule for `evaluation`'s labels: its own, else the block's, else None."""
        for own in self.evaluations:
            if own.name == evaluation:
                return own
        return self.labels

    def place(self, agent_name: str, operation_name: str, service_name: str) -> GenAISurface | None:
        """The first surface rule matching, in the block's order."""
        for rule in self.surfaces:
            if rule.matches(agent_name, operation_name, service_name):
                return rule
        return None


def read_first(attrs: dict[str, Any], key: str) -> Any:
    """`key`, else the deprecated name the conventions replaced it with."""
    value = attrs.get(key)
    if value is None and key in DEPRECATED:
        return attrs.get(DEPRECATED[key])
    return value
