"""Make the HTML of ``asv publish`` work without the internet, from committed copies of its libraries.

Run by every ``asv publish`` (ci/history/site/asv_html.py); why: docs/HISTORY.md, "site/offline_html.py".
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from ci.common.errors import HarnessError
from ci.common.files import write_text_atomic

VENDOR_DIR = Path(__file__).parents[1] / "vendor"
LOCK_FILE = VENDOR_DIR / "lock.json"
# A <script src=...> or <link href=...> tag naming one URL, with its attributes.
_TAG = re.compile(r"<(script|link)\b[^>]*?\b(?:src|href)=\"(?P<url>https://[^\"]+)\"[^>]*>")


class AssetsUnavailable(HarnessError, RuntimeError):
    """A library the page needs is missing, altered, or unknown here; the message says which."""


@dataclass(frozen=True)
class Asset:
    """One library file: where asv's page loads it from, and the committed copy that replaces it."""

    cdn_url: str
    file: str  # under VENDOR_DIR, and under the published html_dir/vendor/
    package: str  # npm package@version it was taken from
    path_in_package: str
    sha256: str
    license: str  # under VENDOR_DIR


def locked_assets(lock_file: Path = LOCK_FILE) -> dict[str, Asset]:
    """CDN URL -> Asset, as ``vendor/lock.json`` names them."""
    rows = json.loads(lock_file.read_text())["assets"]
    return {row["cdn_url"]: Asset(**row) for row in rows}


def kernel_page_assets(lock_file: Path = LOCK_FILE) -> dict[str, Asset]:
    """File -> Asset: what the kernel pages load (``kernel_pages`` in ``vendor/lock.json``: plotly.js's basic
    bundle), copied beside them by ci.history.site.kernel_page; no CDN serves them (``cdn_url`` is empty)."""
    rows = json.loads(lock_file.read_text()).get("kernel_pages", [])
    return {row["file"]: Asset(cdn_url="", **{k: v for k, v in row.items() if k != "why"}) for row in rows}


def copy_locked(asset: Asset, target: Path, vendor_dir: Path = VENDOR_DIR) -> Path:
    """``asset``'s committed file copied to ``target``, after its sha256 is checked (AssetsUnavailable if not)."""
    altered = sha256_mismatches({asset.file: asset}, vendor_dir)
    if altered:
        raise AssetsUnavailable("; ".join(altered))
    shutil.copyfile(vendor_dir / asset.file, target)
    return target


def sha256_mismatches(assets: dict[str, Asset], vendor_dir: Path = VENDOR_DIR) -> list[str]:
    """The committed files that are missing or differ from their locked sha256, each with why."""
    problems = []
    for asset in assets.values():
        path = vendor_dir / asset.file
        if not path.is_file():
            problems.append(f"{path} is missing ({asset.package})")
            continue
        actual = hashlib.sha256(path.read_bytes()).hexdigest()
        if actual != asset.sha256:
            problems.append(
                f"{path} has sha256 {actual}, not {asset.sha256} as {LOCK_FILE.name} says ({asset.package})"
            )
    return problems


def _sri(path: Path, algorithm: str) -> str:
    digest = hashlib.new(algorithm, path.read_bytes()).digest()
    return f"{algorithm}-{base64.b64encode(digest).decode()}"


def localize(html_dir: Path, vendor_dir: Path = VENDOR_DIR, lock_file: Path = LOCK_FILE) -> list[str]:
    """Copy the libraries into ``html_dir``/vendor and point index.html at them. Returns the URLs replaced."""
    index = html_dir / "index.html"
    if not index.is_file():
        raise FileNotFoundError(f"{index}: no published HTML (run asv publish first)")
    assets = locked_assets(lock_file)
    altered = sha256_mismatches(assets, vendor_dir)
    if altered:
        # A page served with other bytes than the locked ones is not the page that was reviewed.
        raise AssetsUnavailable("; ".join(altered))
    text = index.read_text()
    published = html_dir / "vendor"
    published.mkdir(exist_ok=True)
    replaced: list[str] = []
    unknown: list[str] = []

    def rewrite(match: re.Match[str]) -> str:
        url = match.group("url")
        if url not in assets:
            unknown.append(url)
            return match.group(0)
        asset = assets[url]
        source = vendor_dir / asset.file
        shutil.copyfile(source, published / asset.file)
        tag = match.group(0).replace(url, f"vendor/{asset.file}")
        integrity = re.search(r'\bintegrity="(sha\d+)-[^"]*"', tag)
        if integrity and f'integrity="{_sri(source, integrity.group(1))}"' not in tag:
            # Another build than the CDN's: the browser would refuse it under the old hash.
            tag = re.sub(r'\s+integrity="[^"]*"', "", tag)
        tag = re.sub(r'\s+crossorigin="[^"]*"', "", tag)
        replaced.append(url)
        return tag

    text = _TAG.sub(rewrite, text)
    if unknown:
        raise AssetsUnavailable(
            f"{index} loads {', '.join(unknown)}, which {lock_file} does not name: asv's HTML changed; commit "
            f"the library's file in {vendor_dir} with its license and add its row (package@version, sha256)"
        )
    write_text_atomic(index, text)
    return replaced
