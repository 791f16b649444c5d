"""Derive candidate fixtures from a capability surface's prose rules.

Deterministic and explainable: a small grammar of common phrasings (documented in
docs/conformance.md) turns each rule into the strongest fixture it allows, and labels
it trace-enforceable (decidable from recorded markers, tools, dimensions, tags,
latency, cost), judge-required (needs a judge model's grade) or not-enforceable. A
rule the grammar cannot formalise honestly (hedged, ambiguous, an undeclared tool, a
condition on state that events do not record) goes to `needsRepair` with why and how
to rephrase; it never becomes a weak fixture. No network, no model calls.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, NotRequired

from pydantic import ConfigDict, ValidationError, with_config
from typing_extensions import TypedDict

from processors.conformance.eval import explain
from processors.jobs import Job, JobRequest, never_a_finding, saves_nothing
from schemas.conformance import (
    Enforceability,
    Fixture,
    RuleInput,
    SurfaceInput,
)
from schemas.store import Store
from schemas.times import Clock

USER, RESPONSE = "user_message", "response_text"

# --- vocabulary -------------------------------------------------------------------------
HEDGES = (
    "when appropriate", "if appropriate", "as appropriate", "appropriately", "when necessary",
    "if necessary", "as needed", "if needed", "when needed", "where possible", "if possible",
    "when possible", "try to", "generally", "usually", "typically", "ideally", "preferably",
    "reasonable", "reasonably", "as much as possible", "sometimes", "often", "properly",
    "correctly", "the right thing", "good judgement", "good judgment", "etc",
)  # fmt: skip
TONES = (
    "polite", "courteous", "professional", "friendly", "empathetic", "respectful", "concise",
    "clear", "helpful", "kind", "calm", "apologetic", "formal", "informal", "patient", "warm",
    "rude", "sarcastic", "condescending", "dismissive", "honest", "neutral", "positive",
)  # fmt: skip
# Content classes with an observable token: only currency symbols and links qualify;
# PII and topics need a judge (a substring cannot recognise a card number or a name).
TOKEN_CLASSES: tuple[tuple[str, str, str | None], ...] = (
    (r"(?:specific |exact )?(?:dollar|usd) (?:amount|figure|value)s?|prices?|refund amounts?"
     r"|(?:specific |exact )?(?:monetary |money )?amounts?|dollar signs?", "$", None),
    (r"(?:euro|eur) (?:amount|figure)s?", "€", None),
    (r"(?:pound|gbp) (?:amount|figure)s?", "£", None),
    (r"links?|urls?|web addresses|hyperlinks?", "http",
     "links without an http(s) scheme are not caught"),
)  # fmt: skip
STATE_WORDS = (
    "database", "encrypt", "encrypted", "log", "logs", "logged", "store", "stored", "retain",
    "retention",
    "delete", "audit", "authenticated", "logged in", "verified", "account", "subscription",
    "older than", "days", "hours", "weeks", "later", "afterwards", "after the conversation",
    "follow up", "follow-up", "ticket", "crm", "human agent", "supervisor", "premium", "balance",
    "eligible", "policy allows", "in stock",
)  # fmt: skip
SUBJECT = (
    r"(?:(?:the )?(?:agent|assistant|bot|model|system|you) "
    r"|(?:every|each|the|all) (?:events?|responses?|repl(?:y|ies)|answers?|calls?) "
    r"|(?:events|responses|replies|answers) )?"
)
MODAL = (
    r"(?:must always |must |should always |should |shall |will |always |has to |have to "
    r"|needs to |need to |is required to |are required to )?"
)
NEGATION = (
    r"(?:never|do not|don't|does not|doesn't|must not|mustn't|must never|should not|"
    r"shouldn't|should never|may not|cannot|can't|is not allowed to|are not allowed to|"
    r"is forbidden to|will not|won't)"
)
TOOL_VERBS = r"(?:invoke|invoking|call|calling|use|using|run|running|trigger|triggering|execute|executing|query|querying)"  # noqa: E501
SAY_VERBS = (
    r"(?:say|mention|include|quote|output|reveal|share|disclose|write|give|provide|state|"
    r"promise|offer|use|repeat|expose|print|return|respond with|reply with|end with|start with|"
    r"begin with|contain|tell (?:the )?(?:users?|customers?))"
)
RESPONDING = r"(?: before (?:responding|answering|replying)| first| before anything else)?"
USER_VERBS = (
    r"(?:asks for|asks about|asks|requests|mentions|says|writes|wants|inquires about|"
    r"enquires about|is asking for|is asking about|types|uses the word|brings up|talks about)"
)
DETERMINERS = {"a", "an", "the", "their", "his", "her", "my", "our", "your", "any", "some"}
USER_SUBJECT = r"(?:the |a |an |any )?(?:user|customer|caller|client|requester)"


class Unparsed(Exception):
    """A clause the grammar cannot formalise: `why` it failed, how to `rephrase` it."""

    def __init__(self, why: str, rephrase: str, *, state: bool = False) -> None:
        super().__init__(why)
        self.why, self.rephrase, self.state = why, rephrase, state


@dataclass
class Rule:
    """A normalised rule: lower-case text with quoted literals as «n» and tools as ⟨n⟩."""

    text: str
    literals: list[str]
    tools: list[str]

    def display(self, text: str) -> str:
        """Text with «n» and ⟨n⟩ placeholders put back as written."""
        text = re.sub(r"«(\d+)»", lambda m: f'"{self.literals[int(m[1])]}"', text)
        return re.sub(r"⟨(\d+)⟩", lambda m: self.tools[int(m[1])], text)

    def literal(self, token: str) -> str:
        return self.literals[int(token.strip("«»"))]

    def tool(self, token: str) -> str:
        return self.tools[int(token.strip("⟨⟩"))]


@dataclass
class Parsed:
    """A clause as predicates; `implied_when` carries the guard an ordering rule needs."""

    assertions: list[dict[str, Any]]
    implied_when: list[dict[str, Any]] = field(default_factory=list)
    caveats: list[str] = field(default_factory=list)
    judge: bool = False


# --- normalisation ----------------------------------------------------------------------


def _normalise(text: str, tools: Sequence[str]) -> Rule:
    text = re.sub(r"\s+", " ", text.replace("“", '"').replace("”", '"').replace("’", "'"))
    text = text.strip().rstrip(".!;").strip()
    literals: list[str] = []

    def keep(match: re.Match[str]) -> str:
        literals.append(match.group(1) or match.group(2))
        return f"«{len(literals) - 1}»"

    text = re.sub(r"\"([^\"]{1,200})\"|(?<![\w])'([^']{1,200})'(?![\w])", keep, text)
    lowered = text.lower()
    found: list[str] = []
    for name in sorted(tools, key=len, reverse=True):
        # The declared spelling, or words-with-spaces when followed by "tool": "the refund
        # lookup tool"; a bare "order status" stays a phrase, not the order_status tool.
        exact, spaced = re.escape(name.lower()), re.escape(name.lower().replace("_", " "))
        suffix = r"(?: (?:tool|function|api))"
        pattern = rf"(?:the )?(?<![\w])(?:{exact}(?![\w]){suffix}?|{spaced}{suffix})"
        if re.search(pattern, lowered):
            found.append(name)
            lowered = re.sub(pattern, f"⟨{len(found) - 1}⟩", lowered)
    return Rule(lowered, literals, found)


def _check_vocabulary(rule: Rule) -> None:
    for hedge in HEDGES:
        if re.search(rf"(?<![\w]){re.escape(hedge)}(?![\w])", rule.text):
            raise Unparsed(
                f"hedged wording ({hedge!r}) leaves the condition to judgement",
                'state the condition observably, e.g. \'If the user mentions "refund",'
                " invoke refund_lookup before responding'",
            )
    for ident in re.findall(r"(?<![\w«⟨])[a-z][a-z0-9]*(?:_[a-z0-9]+)+(?![\w])", rule.text):
        raise Unparsed(
            f"mentions {ident!r}, which is not a declared tool of this surface",
            "declare the tool on the surface, or use the declared tool name",
        )


# --- predicates -------------------------------------------------------------------------


def _marker(kind: str, column: str | None, value: str) -> dict[str, Any]:
    out: dict[str, Any] = {"kind": kind, "value": value}
    if column is not None:
        out["column"] = column
    return out


def _content_values(rule: Rule, obj: str) -> tuple[list[str], str, list[str]]:
    """Literal values for a content phrase: (values, joiner 'and'/'or', caveats)."""
    obj = obj.strip()
    quoted = re.findall(r"«\d+»", obj)
    if quoted:
        rest = re.sub(r"«\d+»|,|\b(?:the|words?|phrases?|text|string|and|or)\b", "", obj)
        if rest.strip():
            raise Unparsed(
                f"content {obj!r} mixes quoted text with other words",
                'quote exactly the text to look for, e.g. never say "guaranteed"',
            )
        joiner = "or" if re.search(r"\bor\b", obj) else "and"
        return [rule.literal(q) for q in quoted], joiner, []
    for pattern, token, caveat in TOKEN_CLASSES:
        if re.fullmatch(rf"(?:(?:a|an|any|the) )?(?:{pattern})", obj):
            return [token], "and", [caveat] if caveat else []
    raise LookupError(obj)


def _tool_list(rule: Rule, phrase: str) -> tuple[list[str], str]:
    tokens = re.findall(r"⟨\d+⟩", phrase)
    rest = re.sub(r"⟨\d+⟩|,|\b(?:and|or|both|then)\b", "", phrase).strip()
    if not tokens or rest:
        raise LookupError(phrase)
    joiner = "or" if re.search(r"\bor\b", phrase) else "and"
    return [rule.tool(t) for t in tokens], joiner


def _tool_body(rule: Rule, body: str, negated: bool) -> Parsed | None:
    without = re.fullmatch(
        rf"{TOOL_VERBS} (?P<tool>⟨\d+⟩) without (?:{TOOL_VERBS} )?(?P<other>⟨\d+⟩)(?: first)?",
        body,
    )
    if without and negated:  # "never call A without calling B first" = "never A before B"
        return _ordering(rule.tool(without["tool"]), "before", rule.tool(without["other"]), True)
    match = re.fullmatch(
        rf"{TOOL_VERBS} (?P<tools>.+?)"
        rf"(?: (?P<rel>before|after) (?:{TOOL_VERBS} )?(?P<other>⟨\d+⟩))?{RESPONDING}",
        body,
    )
    if not match:
        return None
    try:
        tools, joiner = _tool_list(rule, match["tools"])
    except LookupError:
        return None
    if joiner == "or":
        raise Unparsed(
            "a choice between tools ('or') cannot be asserted",
            "split it into one rule per tool, or name the one tool that must run",
        )
    if match["other"] is None:
        kind = "tool-not-invoked" if negated else "tool-invoked"
        return Parsed([{"kind": kind, "tool": t} for t in tools])
    other = rule.tool(match["other"])
    if len(tools) != 1:
        raise Unparsed("an ordering over several tools", "state one ordering per rule")
    return _ordering(tools[0], match["rel"], other, negated)


def _ordering(tool: str, rel: str, other: str, negated: bool) -> Parsed:
    """'call A before B': whenever B runs, A ran first. 'call A after B': whenever B
    runs, A runs too, later. Negated: 'never call A before B' = whenever A runs, B ran
    first; 'never call A after B' = whenever both run, A ran first."""

    def invoked(name: str, before: str | None = None) -> dict[str, Any]:
        return {"kind": "tool-invoked", "tool": name, **({"before": before} if before else {})}

    if not negated and rel == "before":
        return Parsed([invoked(tool, other)], [invoked(other)])
    if not negated:
        return Parsed([invoked(tool), invoked(other, tool)], [invoked(other)])
    if rel == "before":
        return Parsed([invoked(other, tool)], [invoked(tool)])
    return Parsed([invoked(tool, other)], [invoked(tool), invoked(other)])


def _content_body(rule: Rule, body: str, negated: bool, original: str) -> Parsed | None:
    match = re.fullmatch(
        rf"{SAY_VERBS} (?P<obj>.+?)(?: back)?"
        r"(?: (?:in|to) (?:the|a|any|your) (?:response|reply|answer|user|customer)s?)?",
        body,
    )
    if not match:
        return None
    try:
        values, joiner, caveats = _content_values(rule, match["obj"])
    except LookupError:
        # Semantic content (PII, competitors, advice): only a judge can recognise it.
        return Parsed([{"kind": "judge", "criterion": original}], judge=True)
    if not negated and joiner == "or":
        raise Unparsed(
            "one of several phrases ('or') must appear: a choice cannot be asserted",
            "name the one phrase that must appear",
        )
    kind = "marker-not-contains" if negated else "marker-contains"
    return Parsed([_marker(kind, RESPONSE, v) for v in values], caveats=caveats)


def _number(text: str) -> float:
    return float(text.replace(",", ""))


def _limit_body(body: str) -> Parsed | None:
    unit = r"(?P<unit>ms|milliseconds?|s|secs?|seconds?)"
    unit2 = unit.replace("<unit>", "<unit2>")
    bound = r"(?:under|below|at most|no more than|less than|within|in under|in less than)"
    latency = re.fullmatch(
        rf"(?:respond|reply|answer|finish|complete)(?: to the user)? {bound} (?P<n>[\d.,]+) ?{unit}"
        rf"|(?:keep )?(?:the )?latency (?:must be |should be |be |stays? |is )?{bound} (?P<n2>[\d.,]+) ?{unit2}",  # noqa: E501
        body,
    )
    if latency:
        n = _number(latency["n"] or latency["n2"])
        seconds = (latency["unit"] or latency["unit2"]).startswith("s")
        return Parsed([{"kind": "latency-at-most", "maxMs": n * 1000 if seconds else n}])
    cost = re.fullmatch(
        rf"(?:keep )?(?:the )?(?:cost|spend)(?: per (?:call|response|request|reply))? "
        rf"(?:must be |should be |be |stays? |is )?{bound} \$(?P<n>[\d.,]+)(?: per (?:call|response|request|reply))?"  # noqa: E501
        rf"|(?:spend|cost) no more than \$(?P<n2>[\d.,]+)(?: per (?:call|response|request|reply))?",
        body,
    )
    if cost:
        return Parsed([{"kind": "cost-at-most", "maxUsd": _number(cost["n"] or cost["n2"])}])
    return None


def _exceed_body(body: str) -> Parsed | None:
    """'never exceed 2 seconds (of latency)' / 'do not exceed $0.05 per call'."""
    latency = re.fullmatch(
        r"(?:exceed|take (?:more|longer) than) (?P<n>[\d.,]+) ?"
        r"(?P<unit>ms|milliseconds?|s|secs?|seconds?)(?: of latency| to (?:respond|answer|reply))?",
        body,
    )
    if latency:
        n = _number(latency["n"])
        factor = 1000 if latency["unit"].startswith("s") else 1
        return Parsed([{"kind": "latency-at-most", "maxMs": n * factor}])
    cost = re.fullmatch(
        r"(?:exceed|cost more than|spend more than) \$(?P<n>[\d.,]+)"
        r"(?: per (?:call|response|request|reply))?(?: in cost)?",
        body,
    )
    if cost:
        return Parsed([{"kind": "cost-at-most", "maxUsd": _number(cost["n"])}])
    return None


def _dimension_body(rule: Rule, body: str) -> Parsed | None:
    passed = re.fullmatch(
        r"(?:pass (?:the )?(?P<a>[a-z][\w-]*) (?:check|dimension|evaluation|grade)"
        r"|(?:the )?(?P<b>[a-z][\w-]*) (?:check|dimension) (?:must |should )?pass(?:es)?)",
        body,
    )
    if passed:
        return Parsed([{"kind": "dimension-passed", "dimension": passed["a"] or passed["b"]}])
    score = re.fullmatch(
        r"(?:score at least (?P<n>[\d.]+) on (?:the )?(?P<a>[a-z][\w-]*)(?: dimension)?"
        r"|(?:the )?(?P<b>[a-z][\w-]*) score (?:must be |should be |is )?(?:at least|no less than)"
        r" (?P<n2>[\d.]+))",
        body,
    )
    if score:
        return Parsed(
            [
                {
                    "kind": "score-at-least",
                    "dimension": score["a"] or score["b"],
                    "min": float(score["n"] or score["n2"]),
                }
            ]
        )
    tag = re.fullmatch(
        r"(?:carry|include|have) the cohort tag (?P<q>«\d+»)|be tagged (?P<q2>«\d+»)", body
    )
    if tag:
        return Parsed([{"kind": "cohort-tag-present", "tag": rule.literal(tag["q"] or tag["q2"])}])
    return None


def _tone_body(body: str) -> bool:
    words = "|".join(TONES)
    return bool(
        re.fullmatch(
            rf"(?:be|remain|stay|sound|act|respond|reply|answer|speak)(?: in)?(?: an?)?(?: very)?"
            rf" (?:{words})(?:(?:,| and| or) (?:{words}))*(?: (?:tone|manner|way|language))?"
            rf"(?: (?:at all times|always|with (?:the )?(?:user|customer)s?))?"
            rf"|use (?:an? )?(?:{words}) (?:tone|language)",
            body,
        )
    )


PASSIVE = re.compile(
    r"(?P<t>⟨\d+⟩) (?P<modal>must|should|has to|needs to|is to) (?P<neg>not |never )?(?:always )?"
    r"be (?:called|invoked|used|run)(?P<rest>(?: before| after| first).*)?"
)


def _active(body: str) -> str:
    """'T must be called before U' -> 'call T before U' (the grammar's active voice)."""
    match = PASSIVE.fullmatch(body)
    if not match:
        return body
    return f"{'never ' if match['neg'] else ''}call {match['t']}{match['rest'] or ''}"


def parse_body(rule: Rule, body: str, original: str) -> Parsed:
    """An action clause ("invoke X before responding", "never say ...")."""
    body = re.sub(r"^before (?:responding|answering|replying),? ", "", body.strip())
    body = _active(re.sub(rf"^(?:please |then )?{SUBJECT}", "", body))
    negated = bool(re.match(rf"{NEGATION} ", body))
    body = re.sub(rf"^{NEGATION} ", "", body) if negated else re.sub(rf"^{MODAL}", "", body)
    body = re.sub(r"^(?:ever |always )", "", body)
    parsed = _tool_body(rule, body, negated) or _content_body(rule, body, negated, original)
    if parsed is None and not negated:
        parsed = _limit_body(body) or _dimension_body(rule, body)
    if parsed is None and negated:
        parsed = _exceed_body(body)
    if parsed is not None:
        return parsed
    if _tone_body(body) or (negated and _tone_body("be " + re.sub(r"^be ", "", body))):
        return Parsed([{"kind": "judge", "criterion": original}], judge=True)
    raise _unrecognised(body, rule.text)


def _unrecognised(clause: str, context: str = "") -> Unparsed:
    for word in STATE_WORDS:
        if re.search(rf"(?<![\w]){re.escape(word)}(?![\w])", f"{clause} {context}"):
            return Unparsed(
                f"refers to state that evaluation events do not record ({word!r})",
                'record it on the event (a marker or a cohort tag such as "tier=premium") and'
                " refer to that, e.g. 'If the event is tagged \"tier=premium\", ...'",
                state=True,
            )
    return Unparsed(
        f"no phrasing of the rule grammar matches {clause!r}",
        'use one of the documented forms: \'If the user asks for "X", invoke T before'
        " responding', 'Never say \"X\"', 'Only call T after U', 'Be polite'",
    )


def parse_condition(rule: Rule, cond: str) -> Parsed:
    """A condition clause ("the user asks for a refund", "refund_lookup returned one")."""
    cond = cond.strip()
    tool = re.fullmatch(
        r"(?P<t>⟨\d+⟩) (?:(?:was|is|has been|had been|gets|got) )?(?P<neg>not |never )?"
        r"(?P<verb>invoked|called|used|run|triggered|executed|returned(?: .+)?|succeeded)"
        rf"|(?:after |once )?(?:{TOOL_VERBS} )(?P<t2>⟨\d+⟩)"
        r"|(?P<t3>⟨\d+⟩) (?:was not|wasn't|has not been|hasn't been|is not)"
        r" (?:invoked|called|used)",
        cond,
    )
    if tool:
        name = rule.tool(tool["t"] or tool["t2"] or tool["t3"])
        negative = bool(tool["neg"] or tool["t3"])
        caveats = []
        if tool["verb"] and tool["verb"].startswith(("returned", "succeeded")):
            caveats.append(
                f"events record tool names, not results: '{name} returned ...' is checked as"
                f" '{name} was invoked'"
            )
        kind = "tool-not-invoked" if negative else "tool-invoked"
        return Parsed([{"kind": kind, "tool": name}], caveats=caveats)
    user = re.fullmatch(rf"{USER_SUBJECT}(?:'s message)? {USER_VERBS} (?P<topic>.+)", cond)
    if user:
        return Parsed([_marker("marker-contains", USER, _keyword(rule, user["topic"]))])
    said = re.fullmatch(
        rf"(?P<who>{USER_SUBJECT}'s message|the (?:response|reply|answer)) "
        r"(?P<neg>does not |doesn't )?(?:contains?|mentions?|includes?) (?P<obj>.+)",
        cond,
    )
    if said:
        column = USER if "message" in said["who"] else RESPONSE
        try:
            values, _, caveats = _content_values(rule, said["obj"])
        except LookupError:
            raise _unquoted(said["obj"]) from None
        if len(values) != 1:
            raise Unparsed("a condition on several phrases", "use one quoted phrase per condition")
        kind = "marker-not-contains" if said["neg"] else "marker-contains"
        return Parsed([_marker(kind, column, values[0])], caveats=caveats)
    graded = re.fullmatch(
        r"(?:the )?(?P<d>[a-z][\w-]*) (?:dimension|check) (?:has )?"
        r"(?P<r>passed|failed|passes|fails)",
        cond,
    )
    if graded:
        kind = "dimension-passed" if graded["r"].startswith("pass") else "dimension-failed"
        return Parsed([{"kind": kind, "dimension": graded["d"]}])
    tagged = re.fullmatch(r"the (?:event|call|request|conversation) is tagged (?P<q>«\d+»)", cond)
    if tagged:
        return Parsed([{"kind": "cohort-tag-present", "tag": rule.literal(tagged["q"])}])
    raise _unrecognised(cond, rule.text)


def _unquoted(topic: str) -> Unparsed:
    return Unparsed(
        f"the topic {topic!r} is a phrase, and matching is by substring",
        f'quote the keyword to look for, e.g. If the user mentions "{topic.split()[-1]}", ...',
    )


def _keyword(rule: Rule, topic: str) -> str:
    words = [w for w in topic.split() if w not in DETERMINERS]
    if len(words) == 1 and re.fullmatch(r"«\d+»", words[0]):
        return rule.literal(words[0])
    if len(words) == 1 and re.fullmatch(r"[a-z][a-z-]{2,}", words[0]):
        return words[0]
    raise _unquoted(topic)


# --- combination ------------------------------------------------------------------------
NEGATE = {
    "tool-invoked": "tool-not-invoked",
    "tool-not-invoked": "tool-invoked",
    "marker-contains": "marker-not-contains",
    "marker-not-contains": "marker-contains",
    "dimension-passed": "dimension-failed",
    "dimension-failed": "dimension-passed",
}
CLAUSES: tuple[tuple[str, str], ...] = (
    ("if", r"(?:if|when|whenever|once|in case|after) (?P<cond>.+?), (?:then )?(?P<body>.+)"),
    ("only-if", r"only (?P<body>.+?) (?P<rel>if|when|after) (?P<cond>.+)"),
    ("only-if", r"(?P<body>.+?) only (?P<rel>if|when|after) (?P<cond>.+)"),
    ("unless", r"(?P<body>.+?),? (?:unless|except when|except if) (?P<cond>.+)"),
    ("if", r"(?P<body>.+?),? (?:if|when|whenever) (?P<cond>.+)"),
)


def _split(text: str) -> tuple[str, re.Match[str]] | None:
    """The first clause form that matches: (form, match with body and cond)."""
    for pattern, regex in CLAUSES:
        match = re.fullmatch(regex, text)
        if match:
            return pattern, match
    return None


def _negate(parsed: Parsed) -> list[dict[str, Any]]:
    if len(parsed.assertions) != 1 or parsed.assertions[0]["kind"] not in NEGATE:
        raise Unparsed(
            "the 'unless' condition cannot be negated as one predicate",
            "rephrase as 'If <condition>, <action>'",
        )
    (predicate,) = parsed.assertions
    negated = {**predicate, "kind": NEGATE[predicate["kind"]]}
    negated.pop("before", None)
    return [negated]


@dataclass
class Formalised:
    pattern: str
    when: list[dict[str, Any]]
    assertions: list[dict[str, Any]]
    enforceability: Enforceability
    caveats: list[str]


def _judge_whole(original: str, pattern: str, caveat: str) -> Formalised:
    return Formalised(
        pattern, [], [{"kind": "judge", "criterion": original}], "judge-required", [caveat]
    )


def formalise(rule: Rule, original: str) -> Formalised:
    """Split a rule into condition and action and combine their predicates."""
    _check_vocabulary(rule)
    split = _split(rule.text)
    if split is None:
        body = parse_body(rule, rule.text, original)
        kind: Enforceability = "judge-required" if body.judge else "trace-enforceable"
        return Formalised("action", body.implied_when, body.assertions, kind, body.caveats)
    pattern, match = split
    if pattern == "only-if":
        return _only_if(rule, match, original)
    body = parse_body(rule, match["body"], original)
    try:
        cond = parse_condition(rule, match["cond"])
    except Unparsed as err:
        if body.judge and not err.state:
            return _judge_whole(
                original, f"{pattern}/judged", f"the condition needs judgement: {err.why}"
            )
        raise
    when = _negate(cond) if pattern == "unless" else cond.assertions
    kind = "judge-required" if body.judge else "trace-enforceable"
    caveats = cond.caveats + body.caveats
    return Formalised(pattern, when + body.implied_when, body.assertions, kind, caveats)


def _only_if(rule: Rule, match: re.Match[str], original: str) -> Formalised:
    """'Only <action> if|after <condition>': when the action happened, the condition holds."""
    body = parse_body(rule, match["body"], original)
    if body.judge or body.implied_when or any(a["kind"] not in NEGATE for a in body.assertions):
        raise Unparsed(
            "'only if' needs an observable action to guard",
            "rephrase as 'Only call T if U was called' or 'Never say \"X\" unless U was called'",
        )
    if match["rel"] == "after":
        cond_tool = parse_condition(rule, f"{match['cond']} was invoked")
        (action,) = body.assertions
        (prior,) = cond_tool.assertions
        if action["kind"] != "tool-invoked" or prior["kind"] != "tool-invoked":
            raise Unparsed("'only after' orders two tools", "write 'Only call T after U'")
        ordered = {"kind": "tool-invoked", "tool": prior["tool"], "before": action["tool"]}
        return Formalised("only-after", [action], [ordered], "trace-enforceable", [])
    cond = parse_condition(rule, match["cond"])
    return Formalised(
        "only-if", body.assertions, cond.assertions, "trace-enforceable", cond.caveats
    )


# --- the job ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Candidate:
    rule_id: str
    rule: str
    enforceability: Enforceability
    pattern: str | None
    fixture: Fixture | None
    caveats: tuple[str, ...] = ()

    @property
    def explanation(self) -> str | None:
        if self.fixture is None:
            return None
        return explain(self.fixture.when or [], self.fixture.checks())

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "ruleId": self.rule_id,
            "rule": self.rule,
            "enforceability": self.enforceability,
            "pattern": self.pattern,
            "explanation": self.explanation,
            "fixture": self.fixture.to_json() if self.fixture else None,
        }
        if self.caveats:
            out["caveats"] = list(self.caveats)
        return out


@dataclass(frozen=True)
class Repair:
    rule_id: str
    rule: str
    why: str
    rephrase: str

    def to_json(self) -> dict[str, Any]:
        return {
            "ruleId": self.rule_id,
            "rule": self.rule,
            "why": self.why,
            "rephrase": self.rephrase,
        }


@dataclass(frozen=True)
class Derivation:
    surface_id: str
    candidates: tuple[Candidate, ...]
    needs_repair: tuple[Repair, ...]

    def count(self, label: Enforceability) -> int:
        return sum(1 for c in self.candidates if c.enforceability == label)

    @property
    def coverage_line(self) -> str:
        n, k = len(self.candidates), self.count("trace-enforceable")
        return f"{k} of {n} rule{'s' if n != 1 else ''} mechanically enforceable"

    def to_json(self) -> dict[str, Any]:
        return {
            "surfaceId": self.surface_id,
            "candidates": [c.to_json() for c in self.candidates],
            "coverage": {
                "summary": self.coverage_line,
                "rules": len(self.candidates),
                "traceEnforceable": self.count("trace-enforceable"),
                "judgeRequired": self.count("judge-required"),
                "notEnforceable": self.count("not-enforceable"),
            },
            "needsRepair": [r.to_json() for r in self.needs_repair],
        }


def _rules(surface: SurfaceInput) -> list[RuleInput]:
    out = []
    for n, rule in enumerate(surface.rules, start=1):
        item = RuleInput(text=rule) if isinstance(rule, str) else rule
        rule_id = item.rule_id or f"{surface.surface_id}-r{n:02d}"
        out.append(RuleInput(rule_id=rule_id, text=item.text, source=item.source))
    return out


def _fixture(surface: SurfaceInput, rule: RuleInput, formal: Formalised) -> Fixture:
    body: dict[str, Any] = {
        "fixtureId": f"fx-{rule.rule_id}",
        "ruleId": rule.rule_id,
        "description": rule.text,
        "enforceability": formal.enforceability,
        "appliesTo": {"surfaceId": surface.surface_id},
    }
    if rule.source or surface.rule_source:
        body["ruleSource"] = rule.source or surface.rule_source
    if formal.when:
        body["when"] = formal.when
    key = "assertion" if len(formal.assertions) == 1 else "assertions"
    body[key] = formal.assertions[0] if key == "assertion" else formal.assertions
    return Fixture.model_validate(body)


def _derive_one(surface: SurfaceInput, rule: RuleInput, tools: list[str]) -> Candidate | Repair:
    assert rule.rule_id is not None
    normalised = _normalise(rule.text, tools)
    try:
        formal = formalise(normalised, rule.text)
        fixture = _fixture(surface, rule, formal)
    except Unparsed as err:
        return Repair(
            rule.rule_id, rule.text, normalised.display(err.why), normalised.display(err.rephrase)
        )
    except ValidationError as err:
        why = "; ".join(str(e["msg"]) for e in err.errors())
        return Repair(rule.rule_id, rule.text, f"the fixture would be invalid: {why}", "simplify")
    return Candidate(
        rule.rule_id,
        rule.text,
        formal.enforceability,
        formal.pattern,
        fixture,
        tuple(formal.caveats),
    )


def derive(surface: SurfaceInput) -> Derivation:
    """One candidate per rule, labelled, plus the rules that need repair."""
    tools = [t.name for t in surface.tools]
    candidates, repairs = [], []
    for rule in _rules(surface):
        outcome = _derive_one(surface, rule, tools)
        if isinstance(outcome, Repair):
            repairs.append(outcome)
            outcome = Candidate(rule.rule_id or "", rule.text, "not-enforceable", None, None)
        candidates.append(outcome)
    return Derivation(surface.surface_id, tuple(candidates), tuple(repairs))


# --- the job (processors.jobs) -----------------------------------------------------------


class DeriveRequest(SurfaceInput, JobRequest):
    """The Guide's POST /lens/conformance/derive body: a capability surface (its tools and
    prose rules). Reads nothing from the store."""


Request = DeriveRequest


Report = Derivation


def run(store: Store, request: Request, clock: Clock) -> Derivation:
    return derive(request)


persist = saves_nothing
finding = never_a_finding


@with_config(ConfigDict(extra="forbid"))
class CandidateDocument(TypedDict):
    ruleId: str
    rule: str
    enforceability: Enforceability
    pattern: str | None
    explanation: str | None
    fixture: Fixture | None
    caveats: NotRequired[list[str]]


@with_config(ConfigDict(extra="forbid"))
class CoverageDocument(TypedDict):
    summary: str
    rules: int
    traceEnforceable: int
    judgeRequired: int
    notEnforceable: int


@with_config(ConfigDict(extra="forbid"))
class RepairDocument(TypedDict):
    ruleId: str
    rule: str
    why: str
    rephrase: str


@with_config(ConfigDict(extra="forbid"))
class DerivationDocument(TypedDict):
    """`Derivation.to_json()`: candidates, the coverage headline, the needs-repair panel."""

    surfaceId: str
    candidates: list[CandidateDocument]
    coverage: CoverageDocument
    needsRepair: list[RepairDocument]


JOB = Job(
    "conformance.derive", Request, DerivationDocument, run, persist, finding, uses_store=False
)
