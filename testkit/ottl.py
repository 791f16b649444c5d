"""The part of the OpenTelemetry Transformation Language (OTTL) the shipped collector
configuration's filter conditions use, evaluated against a span or a log record, so a
test can say which telemetry the sidecar routes where without a collector binary.

Grammar (OTTL's, restricted): boolean expressions of `and`, `or`, `not` and
parentheses over comparisons `<value> == <value>` / `!=`, and the `IsMatch(<value>,
"<regex>")` converter; a value is a string literal (`\\\\` and `\\"` escapes), `nil`,
`true`, `false`, or a path: `name`, `event_name`, `attributes["k"]`,
`resource.attributes["k"]`. As in OTTL, a missing attribute is nil, and values of
different types are unequal. Anything else is a `SyntaxError`: the configuration uses
more of OTTL than this checks.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

_TOKEN = re.compile(
    r"""\s*(?:
        (?P<string>"(?:[^"\\]|\\.)*")
      | (?P<op>==|!=|\(|\)|,|\[|\]|\.)
      | (?P<word>[A-Za-z_][A-Za-z0-9_]*)
    )""",
    re.VERBOSE,
)
_PATHS = frozenset({"name", "event_name", "attributes", "resource"})


def _tokens(text: str) -> list[tuple[str, str]]:
    out, at = [], 0
    while at < len(text):
        if text[at:].strip() == "":
            break
        match = _TOKEN.match(text, at)
        if match is None:
            raise SyntaxError(f"OTTL subset: cannot read {text[at:]!r}")
        kind = match.lastgroup
        assert kind is not None
        out.append((kind, match[kind]))
        at = match.end()
    return out


def _unquote(literal: str) -> str:
    return re.sub(r"\\(.)", r"\1", literal[1:-1])


@dataclass
class _Parser:
    tokens: list[tuple[str, str]]
    at: int = 0

    def peek(self) -> tuple[str, str] | None:
        return self.tokens[self.at] if self.at < len(self.tokens) else None

    def take(self, value: str | None = None) -> tuple[str, str]:
        token = self.peek()
        if token is None or (value is not None and token[1] != value):
            raise SyntaxError(f"OTTL subset: expected {value or 'more'}, got {token}")
        self.at += 1
        return token

    def expression(self) -> Any:
        node = self.conjunction()
        while self.peek() == ("word", "or"):
            self.take()
            node = ("or", node, self.conjunction())
        return node

    def conjunction(self) -> Any:
        node = self.negation()
        while self.peek() == ("word", "and"):
            self.take()
            node = ("and", node, self.negation())
        return node

    def negation(self) -> Any:
        if self.peek() == ("word", "not"):
            self.take()
            return ("not", self.negation())
        return self.comparison()

    def comparison(self) -> Any:
        if self.peek() == ("op", "("):
            self.take()
            node = self.expression()
            self.take(")")
            return node
        left = self.value()
        token = self.peek()
        if token is not None and token[1] in ("==", "!="):
            self.take()
            return (token[1], left, self.value())
        if left[0] != "call":
            raise SyntaxError(f"OTTL subset: {left} is not a condition")
        return left

    def value(self) -> Any:
        kind, text = self.take()
        if kind == "string":
            return ("literal", _unquote(text))
        if text in ("nil", "true", "false"):
            return ("literal", {"nil": None, "true": True, "false": False}[text])
        if text == "IsMatch":
            self.take("(")
            target = self.value()
            self.take(",")
            kind, pattern = self.take()
            if kind != "string":
                raise SyntaxError("OTTL subset: IsMatch takes a string pattern")
            self.take(")")
            return ("call", target, re.compile(_unquote(pattern)))
        if text not in _PATHS:
            raise SyntaxError(f"OTTL subset: unknown path {text!r}")
        path = [text]
        while self.peek() in (("op", "."), ("op", "[")):
            if self.take()[1] == ".":
                path.append(self.take()[1])
            else:
                kind, key = self.take()
                if kind != "string":
                    raise SyntaxError("OTTL subset: a map key is a string")
                path.append(_unquote(key))
                self.take("]")
        return ("path", tuple(path))


def parse(condition: str) -> Any:
    parser = _Parser(_tokens(condition))
    node = parser.expression()
    if parser.peek() is not None:
        raise SyntaxError(f"OTTL subset: unexpected {parser.peek()}")
    return node


def _resolve(item: Mapping[str, Any], path: tuple[str, ...]) -> Any:
    value: Any = item
    for part in path:
        if not isinstance(value, Mapping):
            return None
        value = value.get(part)
    return value


def _evaluate(node: Any, item: Mapping[str, Any]) -> Any:
    kind = node[0]
    if kind == "literal":
        return node[1]
    if kind == "path":
        return _resolve(item, node[1])
    if kind == "call":
        target = _evaluate(node[1], item)
        return isinstance(target, str) and node[2].search(target) is not None
    if kind == "not":
        return not _evaluate(node[1], item)
    if kind == "and":
        return _evaluate(node[1], item) and _evaluate(node[2], item)
    if kind == "or":
        return _evaluate(node[1], item) or _evaluate(node[2], item)
    left, right = _evaluate(node[1], item), _evaluate(node[2], item)
    same = type(left) is type(right) and left == right
    return same if kind == "==" else not same


def matches(condition: str, item: Mapping[str, Any]) -> bool:
    """Whether `condition` holds for `item` (`name`, `event_name`, `attributes`,
    `resource.attributes` as plain mappings)."""
    return bool(_evaluate(parse(condition), item))
