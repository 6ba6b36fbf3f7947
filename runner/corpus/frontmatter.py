"""SKILL.md frontmatter: strict YAML, with the line of every top-level key.

Strict means what portable consumers do: a document that fails to parse, a duplicate key, or a
frontmatter that is not a mapping is an error (Claude Code would silently drop every field).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import yaml

from runner.corpus import bounded
from runner.corpus.findings import Finding, error


@dataclass
class Frontmatter:
    fields: dict[str, Any]
    key_lines: dict[str, int]
    body: str
    body_line: int  # 1-based line where the body starts
    end_line: int = field(default=1)  # line of the closing ---


# libyaml's C parser when present (ten times faster on a 185-skill library), else pure Python.
_BaseLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _StrictLoader(_BaseLoader):  # type: ignore[misc, valid-type]
    """SafeLoader that refuses duplicate keys instead of keeping the last one."""


def _construct_mapping(loader: _StrictLoader, node: yaml.MappingNode, deep: bool = False) -> dict[str, Any]:
    seen: dict[Any, int] = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if not isinstance(key, (str, int, float, bool)) and key is not None:
            raise yaml.constructor.ConstructorError(None, None, "a key must be a plain value", key_node.start_mark)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r} (first at line {seen[key] + 1})", key_node.start_mark)
        seen[key] = key_node.start_mark.line
    mapping: dict[str, Any] = loader.construct_mapping(node, deep=deep)
    return mapping


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


# What YAML aliases may add to a frontmatter, counting each value as one plus its characters: a few anchors reused
# add tens; an alias bomb ("billion laughs": ten aliases of ten aliases of ...) adds 10^9 from a few hundred bytes
# written, and everything that walks the fields (json.dumps, pydantic, plan.json) would expand it. The bound is the
# host's own for frontmatter it does not trust (CLI 2.1.332 refuses such frontmatter over 65,536 characters).
MAX_ALIAS_EXPANSION = 65_536


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    return []


def _weight(node: yaml.Node) -> int:
    return 1 + (len(node.value) if isinstance(node, yaml.ScalarNode) else 0)


def _unbounded(root: yaml.Node, first_line: int) -> tuple[int, str] | None:
    """(line, message) when the composed document, its aliases expanded, is recursive, nests deeper than
    bounded.MAX_NESTING or adds more than MAX_ALIAS_EXPANSION; else None. The composer shares an anchored node
    among its aliases, so this walk is linear in what was written (each node once: memoised, iterative)."""
    depth: dict[int, int] = {}
    size: dict[int, int] = {}
    open_path: set[int] = set()  # the nodes whose subtree is being walked: an alias of one is a cycle
    written = 0
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, finished = stack.pop()
        key = id(node)
        if finished:
            open_path.discard(key)
            children = _children(node)
            depth[key] = 1 + max((depth[id(child)] for child in children), default=0)
            size[key] = _weight(node) + sum(size[id(child)] for child in children)
            if depth[key] > bounded.MAX_NESTING:
                return first_line + node.start_mark.line, bounded.nesting_message("the frontmatter")
            continue
        if key in size:
            continue
        if key in open_path:
            return (first_line + node.start_mark.line,
                    "frontmatter holds an alias inside its own anchor (a value that contains itself, endless when "
                    "expanded): write the value out")
        open_path.add(key)
        written += _weight(node)
        stack.append((node, True))
        stack.extend((child, False) for child in reversed(_children(node)) if id(child) not in size)
    added = size[id(root)] - written
    if added <= MAX_ALIAS_EXPANSION:
        return None
    line = first_line
    if isinstance(root, yaml.MappingNode):  # point at the field whose value expands the most
        key_node, _ = max(root.value, key=lambda pair: size[id(pair[1])])
        line = first_line + key_node.start_mark.line
    return line, (f"frontmatter aliases expand to {added:,} more values and characters than are written (at most "
                  f"{MAX_ALIAS_EXPANSION:,}): an alias bomb? It was not expanded; write the values out")


def split(text: str, shown: str) -> tuple[str, int, str, int] | Finding:
    """(yaml text, its first line, body, body's first line) or a finding when there is no block."""
    lines = text.splitlines(keepends=True)
    if not lines or lines[0].strip() != "---":
        return error("frontmatter-missing", shown, 1,
                     "SKILL.md must begin with a '---' line opening the YAML frontmatter")
    for index in range(1, len(lines)):
        if lines[index].strip() == "---":
            return "".join(lines[1:index]), 2, "".join(lines[index + 1:]), index + 2
    return error("frontmatter-unclosed", shown, 1, "the frontmatter opened on line 1 is never closed by a '---' line")


def parse(text: str, shown: str) -> tuple[Frontmatter | None, Finding | None]:
    parts = split(text, shown)
    if isinstance(parts, Finding):
        return None, parts
    source, first_line, body, body_line = parts
    try:
        loader = _StrictLoader(source)
        try:
            node = loader.get_single_node()
            if node is not None and (unbounded := _unbounded(node, first_line)):
                return None, error("frontmatter-yaml", shown, *unbounded)
            data = loader.construct_document(node) if node is not None else None
        finally:
            loader.dispose()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = first_line + (mark.line if mark else 0)
        col = mark.column + 1 if mark else None
        problem = exc.problem or exc.context or "invalid YAML"
        if "maximum nesting depth" in problem:  # libyaml's own bound (1,000), far past ours: said in our words
            return None, error("frontmatter-yaml", shown, line, bounded.nesting_message("the frontmatter"))
        return None, error("frontmatter-yaml", shown, line,
                           f"frontmatter is not strict YAML: {problem}. Strict consumers drop the whole skill; "
                           "quote values that contain ': ' (single quotes, doubled apostrophes)", col=col)
    except yaml.YAMLError as exc:
        return None, error("frontmatter-yaml", shown, first_line, f"frontmatter is not strict YAML: {exc}")
    except (ValueError, TypeError, KeyError, AttributeError, IndexError, RecursionError, OverflowError) as exc:
        # PyYAML's constructors raise plain exceptions on some values (a 30 February timestamp,
        # `0b` with no digits, a merge key on a scalar): still bad frontmatter, never a crash.
        return None, error("frontmatter-yaml", shown, first_line,
                           f"frontmatter has a value YAML cannot construct: {type(exc).__name__}: {exc}")
    if data is None:
        data, node = {}, None
    if not isinstance(data, dict):
        return None, error("frontmatter-yaml", shown, first_line,
                           f"frontmatter must be a mapping of fields, found {type(data).__name__}")
    try:
        json.dumps(data, ensure_ascii=False, default=str).encode("utf-8")
    except UnicodeEncodeError:
        # libyaml refuses a "\ud83d" escape (half a surrogate pair); the pure-Python parser, the fallback, keeps it.
        return None, error("frontmatter-yaml", shown, first_line,
                           "frontmatter holds half of a surrogate pair (a \\uD800-\\uDFFF escape with no partner): "
                           "not a character; write the whole character")
    except (TypeError, ValueError, RecursionError):
        pass  # not a question of encoding: the fields are read as they are
    key_lines: dict[str, int] = {}
    if isinstance(node, yaml.MappingNode):
        for key_node, _ in node.value:
            key_lines[str(key_node.value)] = first_line + key_node.start_mark.line
    fields = {str(k): v for k, v in data.items()}
    return Frontmatter(fields=fields, key_lines=key_lines, body=body, body_line=body_line,
                       end_line=body_line - 1), None
