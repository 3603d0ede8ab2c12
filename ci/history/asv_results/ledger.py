"""What each file of the local results folder was when last checked: its size, modification time and git blob id.

A shortcut for the checks, the branch sync and reconcile: a file whose stat matches its entry is skipped.
It lives beside the results folder (``.asv/results.ledger.json``), is written atomically, and without it
every file is checked as new: always correct, only slower (docs/HISTORY.md, "asv_results/ledger.py").
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable
from pathlib import Path

from ci.common.files import write_json_atomic

FORMAT = 2


def git_blob_id(data: bytes) -> str:
    """The id git gives ``data`` as a blob (``git hash-object``), without running git."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


class Ledger:
    def __init__(self, results_dir: Path):
        self.results_dir = results_dir
        self._root = os.fspath(results_dir) + os.sep  # plain strings: a run stats every file of the history
        self.path = results_dir.with_name(results_dir.name + ".ledger.json")
        self.entries: dict[str, list] = {}  # relative path -> [size, mtime_ns, blob id, reconciled]
        try:
            data = json.loads(self.path.read_text())
            if data.get("format") == FORMAT and isinstance(data.get("files"), dict):
                self.entries = data["files"]
        except (OSError, ValueError, AttributeError):
            pass  # no ledger (or a damaged one): every file is looked at as new

    def _stat(self, relative: str) -> tuple[int, int] | None:
        try:
            stat = os.stat(self._root + relative)
        except FileNotFoundError:
            return None
        return stat.st_size, stat.st_mtime_ns

    def known_blob(self, relative: str) -> str | None:
        """The entry's blob id when the file is unchanged since it was recorded; None otherwise (nothing is read)."""
        return self.entries[relative][2] if self.unchanged(relative) else None

    def unchanged(self, relative: str) -> bool:
        """The file is as recorded: same size and modification time as its entry."""
        entry = self.entries.get(relative)
        return entry is not None and tuple(entry[:2]) == self._stat(relative)

    def blob(self, relative: str) -> str | None:
        """The file's blob id: from the entry when unchanged, else hashed (and recorded); None when it is gone."""
        if self.unchanged(relative):
            return self.entries[relative][2]
        path = self.results_dir / relative
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            self.entries.pop(relative, None)
            return None
        self.record(relative, git_blob_id(data))
        return self.entries[relative][2]

    def record(self, relative: str, blob: str) -> None:
        stat = self._stat(relative)
        if stat is None:
            self.entries.pop(relative, None)
        else:
            self.entries[relative] = [stat[0], stat[1], blob, False]

    def reconciled(self, relative: str) -> bool:
        """Unchanged since ci.history.asv_results.folder.reconcile last looked at it."""
        return self.unchanged(relative) and len(self.entries[relative]) > 3 and bool(self.entries[relative][3])

    def mark_reconciled(self, relative: str) -> None:
        if self.blob(relative) is not None:
            self.entries[relative][3] = True

    def forget(self, relatives: Iterable[str]) -> None:
        for relative in relatives:
            self.entries.pop(relative, None)

    def save(self) -> None:
        present = {k: v for k, v in self.entries.items() if os.path.exists(self._root + k)}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        write_json_atomic(self.path, {"format": FORMAT, "files": present}, kept="the ledger as it was, every result")
