"""Markdown for GitHub from untrusted text: every artifact string goes through :func:`code` (a span no backtick run can
close, ``|`` escaped in a table cell, control characters folded, cut to a length); a size cap by whole blocks.
docs/PR_COMMENT.md, "Safely"."""

from __future__ import annotations

import html
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

# GitHub refuses a comment or issue body over 65536 characters.
GITHUB_BODY_LIMIT = 65536
FIELD_LIMIT = 200  # an identifier (benchmark, target, ref)
_CONTROL = re.compile(r"[\x00-\x1f\x7f\u2028\u2029]+")
_BACKTICKS = re.compile(r"`+")


def clean(text: object, limit: int = FIELD_LIMIT) -> str:
    """``text`` on one line (control characters folded to a space), cut to ``limit`` characters with an ellipsis."""
    one_line = _CONTROL.sub(" ", str(text)).strip()
    return one_line if len(one_line) <= limit else one_line[: limit - 1].rstrip() + "…"


def code(text: object, limit: int = FIELD_LIMIT, *, in_table: bool = False) -> str:
    """``text`` as an inline code span: shown literally whatever it contains."""
    body = clean(text, limit)
    if not body:
        return "(empty)"
    longest = max((len(run) for run in _BACKTICKS.findall(body)), default=0)
    fence = "`" * (longest + 1)
    # A span that starts or ends with a backtick needs a space inside the fence (CommonMark strips one).
    pad = " " if body.startswith("`") or body.endswith("`") or (body.startswith(" ") and body.endswith(" ")) else ""
    span = f"{fence}{pad}{body}{pad}{fence}"
    return span.replace("|", "\\|") if in_table else span


def html_code(text: object, limit: int = FIELD_LIMIT) -> str:
    """``text`` as ``<code>`` inside raw HTML (a ``<summary>``): escaped, so it cannot open or close a tag."""
    return f"<code>{html.escape(clean(text, limit), quote=True)}</code>"


def table(rows: Sequence[Mapping[str, str]]) -> str:
    """A GFM table of cells that are already Markdown (:func:`code` ``in_table=True``, or this package's words), the
    first row's keys its columns; a ``|`` not already escaped is escaped here too, so a table never gains a column."""
    if not rows:
        return "_(none)_"
    columns = list(rows[0].keys())
    lines = ["| " + " | ".join(columns) + " |", "|" + "|".join("---" for _ in columns) + "|"]
    for row in rows:
        lines.append("| " + " | ".join(_cell(row.get(c, "")) for c in columns) + " |")
    return "\n".join(lines)


def _cell(text: str) -> str:
    one_line = _CONTROL.sub(" ", text)
    return re.sub(r"(?<!\\)\|", "\\|", one_line) or " "


def details(summary_html: str, body: str) -> str:
    """A folded block: ``summary_html`` is raw HTML (from :func:`html_code`); blank lines keep ``body`` Markdown."""
    return f"<details><summary>{summary_html}</summary>\n\n{body}\n\n</details>"


def percent(value: float, digits: int = 1) -> str:
    return f"{value * 100:+.{digits}f}%"


@dataclass(frozen=True)
class Capped:
    """The text that fits, and how many blocks were left out."""

    text: str
    left_out: int


CAP_NOTE = (
    "_… {n} more section(s) left out: the comment would exceed GitHub's size limit. "
    "The run's step summaries and its artifacts (linked below) have everything._"
)


def join_capped(blocks: Iterable[str], *, footer: str, limit: int = GITHUB_BODY_LIMIT) -> Capped:
    """Whole blocks joined by blank lines, as many as fit under ``limit`` with :data:`CAP_NOTE` and ``footer``: a block
    is never cut in the middle, so a ``<details>`` or a table is never left open."""
    blocks = [b for b in blocks if b]
    kept: list[str] = []
    reserve = len(footer) + len(CAP_NOTE) + 40
    used = 0
    for i, block in enumerate(blocks):
        if used + len(block) + 2 + reserve > limit:
            left = len(blocks) - i
            kept.append(CAP_NOTE.format(n=left))
            return Capped("\n\n".join(kept + [footer]), left)
        kept.append(block)
        used += len(block) + 2
    return Capped("\n\n".join(kept + [footer]), 0)
