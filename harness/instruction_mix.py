"""The instruction mix of compiled code (static counts per kind of instruction), and base vs head.

Dialects ``amdgcn`` (AMDGPU ISA), ``sass`` (``cuobjdump --dump-sass``) and ``ptx``, each a table of (category, pattern
on the mnemonic), first match wins. docs/MEASURING.md, "Instruction mix".
"""

from __future__ import annotations

import re
from collections.abc import Mapping

AMDGCN = (
    ("scaled MFMA", r"v_mfma_scale\w*"),
    ("other MFMA", r"v_mfma\w*|v_smfmac\w*"),
    ("global/buffer load", r"(global|buffer)_load\w*"),
    ("global/buffer store", r"(global|buffer)_store\w*"),
    ("LDS read", r"ds_(read|load)\w*"),
    ("LDS write", r"ds_(write|store)\w*"),
    ("s_waitcnt", r"s_waitcnt\w*"),
    ("s_nop", r"s_nop"),
    ("v_accvgpr move", r"v_accvgpr_\w+"),
    ("branch", r"s_(branch|cbranch\w*)"),
    ("barrier", r"s_barrier\w*"),
)
SASS = (
    ("MMA", r"(HGMMA|HMMA|IMMA|QMMA|OMMA|UTCMMA)"),
    ("global load", r"LDG"),
    ("global store", r"(STG|RED|ATOMG)"),
    ("shared load", r"(LDS|LDSM)"),
    ("shared store", r"STS"),
    ("async copy (cp.async/TMA)", r"(LDGSTS|UTMALDG|UBLKCP|UTMASTG)"),
    ("barrier", r"(BAR|SYNCS|WARPGROUP)"),
    ("branch", r"(BRA|BRX|JMP|JMX|CALL|RET)"),
)
PTX = (
    ("MMA", r"(wgmma\.mma_async|mma\.sync|wmma\.mma)\S*"),
    ("global load", r"ld\.global\S*"),
    ("global store", r"(st|red|atom)\.global\S*"),
    ("shared load", r"(ld\.shared|ldmatrix)\S*"),
    ("shared store", r"(st\.shared|stmatrix)\S*"),
    ("async copy (cp.async/TMA)", r"cp\.async\S*"),
    ("barrier", r"(bar|barrier)\.\S+"),
    ("branch", r"bra\S*"),
)
DIALECTS = {"amdgcn": AMDGCN, "sass": SASS, "ptx": PTX}
TOTAL = "all instructions"

_AMD_MNEMONIC = re.compile(r"^[a-z][a-z0-9]*_[a-z0-9_]+$")
_SASS_LINE = re.compile(r"^\s*/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P[T0-9]+\s+)?([A-Z][A-Z0-9_]*)")
_PTX_PREDICATE = re.compile(r"^@!?%\w+\s+")


def mnemonics(kind: str, text: str) -> list[str]:
    """The instruction mnemonics of ``text`` in order (``kind``: amdgcn, sass or ptx)."""
    if kind == "amdgcn":
        return _amdgcn_mnemonics(text)
    if kind == "sass":
        return [m.group(1) for m in map(_SASS_LINE.match, text.splitlines()) if m]
    if kind == "ptx":
        return _ptx_mnemonics(text)
    raise ValueError(f"kind: {kind!r} is not one of {sorted(DIALECTS)}")


def _amdgcn_mnemonics(text: str) -> list[str]:
    out, in_metadata = [], False
    for line in text.splitlines():
        code = line.split(";", 1)[0].strip()
        if code.startswith(".amdgpu_metadata"):
            in_metadata = True
        elif code.startswith(".end_amdgpu_metadata"):
            in_metadata = False
        elif code and not in_metadata and not code.startswith(".") and not code.endswith(":"):
            word = code.split()[0]
            if _AMD_MNEMONIC.match(word):
                out.append(word)
    return out


def _ptx_mnemonics(text: str) -> list[str]:
    out, in_body = [], False
    for line in text.splitlines():
        code = line.split("//", 1)[0].strip()
        if code.startswith("{"):
            in_body = True  # instructions live inside function bodies; directives outside
            code = code[1:].strip()
        if code.startswith("}"):
            continue
        if not in_body or not code or code.startswith(".") or code.endswith(":") or code.startswith("$"):
            continue
        code = _PTX_PREDICATE.sub("", code)
        word = code.split()[0].rstrip(";")
        if word:
            out.append(word)
    return out


def instruction_mix(kind: str, text: str) -> dict[str, int]:
    """``{category: count}`` for every category of the dialect (zeros included), plus the total."""
    words = mnemonics(kind, text)  # ValueError for an unknown kind
    table = [(name, re.compile(pattern)) for name, pattern in DIALECTS[kind]]
    counts = {name: 0 for name, _ in table}
    for word in words:
        base = word.split(".")[0] if kind == "sass" else word
        for name, pattern in table:
            if pattern.fullmatch(base):
                counts[name] += 1
                break
    counts[TOTAL] = len(words)
    return counts


def mix_diff(base: Mapping[str, int], head: Mapping[str, int]) -> list[dict[str, str]]:
    """Rows ``{instructions, base, head, delta}`` for each category, changed ones marked."""
    rows = []
    for name in list(dict.fromkeys([*base, *head])):
        old, new = base.get(name, 0), head.get(name, 0)
        rows.append(
            {"instructions": name, "base": str(old), "head": str(new), "delta": "" if new == old else f"{new - old:+d}"}
        )
    return rows
