"""Make the HTML of ``asv publish`` work without the internet.

asv 0.6.6's index.html loads jQuery, flot, bootstrap and three small plugins
from public CDNs; on a runner or a laptop without those hosts the page shows
no graph at all. This module installs the same libraries from the npm registry
(``npm install``, the ordinary client) and rewrites index.html to load them
from ``vendor/`` beside it. Where the npm file is byte-identical to the CDN one
(same SRI hash), the ``integrity`` attribute is kept and the browser still
verifies it; where npm ships another build (flot 0.8.3 unminified, stupidtable
1.1.3 instead of 1.0.1, same API) it is dropped.

    python -m asv_bench.offline_html --html .asv/html            # every asv publish does this (ci/history/asv_html.py)
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Sequence

from harness.report import write_text_atomic

REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_ASSETS = REPO_ROOT / ".asv" / "www-assets"

# CDN URL in asv's index.html -> (npm package spec, file inside the package).
ASSETS = {
    "https://code.jquery.com/jquery-3.3.1.min.js": ("jquery@3.3.1", "dist/jquery.min.js"),
    "https://cdnjs.cloudflare.com/ajax/libs/flot/0.8.3/jquery.flot.min.js": ("flot@0.8.3", "jquery.flot.js"),
    "https://cdnjs.cloudflare.com/ajax/libs/flot/0.8.3/jquery.flot.time.min.js": ("flot@0.8.3", "jquery.flot.time.js"),
    "https://cdnjs.cloudflare.com/ajax/libs/flot/0.8.3/jquery.flot.selection.min.js": (
        "flot@0.8.3",
        "jquery.flot.selection.js",
    ),
    "https://cdnjs.cloudflare.com/ajax/libs/flot/0.8.3/jquery.flot.categories.min.js": (
        "flot@0.8.3",
        "jquery.flot.categories.js",
    ),
    "https://cdn.jsdelivr.net/npm/flot-orderbars@1.0.0/js/jquery.flot.orderBars.js": (
        "flot-orderbars@1.0.0",
        "js/jquery.flot.orderBars.js",
    ),
    "https://cdnjs.cloudflare.com/ajax/libs/stupidtable/1.0.1/stupidtable.min.js": (
        "stupid-table-plugin@1.1.3",
        "stupidtable.min.js",
    ),
    "https://cdnjs.cloudflare.com/ajax/libs/blueimp-md5/2.19.0/js/md5.min.js": ("blueimp-md5@2.19.0", "js/md5.min.js"),
    "https://cdn.jsdelivr.net/npm/bootstrap@3.1.1/dist/js/bootstrap.min.js": (
        "bootstrap@3.1.1",
        "dist/js/bootstrap.min.js",
    ),
    "https://cdn.jsdelivr.net/npm/bootstrap@3.1.1/dist/css/bootstrap.min.css": (
        "bootstrap@3.1.1",
        "dist/css/bootstrap.min.css",
    ),
}
# A <script src=...> or <link href=...> tag naming one URL, with its attributes.
_TAG = re.compile(r"<(script|link)\b[^>]*?\b(?:src|href)=\"(?P<url>https://[^\"]+)\"[^>]*>")


class AssetsUnavailable(RuntimeError):
    """The libraries are neither installed nor installable; the message says why."""


def _package_dir(assets: Path, spec: str) -> Path:
    return assets / "node_modules" / spec.rsplit("@", 1)[0]


def ensure_assets(assets: Path = DEFAULT_ASSETS) -> Path:
    """The npm packages under ``assets``/node_modules, installed with npm when missing."""
    specs = sorted({spec for spec, _ in ASSETS.values()})
    missing = [s for s in specs if not (_package_dir(assets, s) / "package.json").is_file()]
    if missing:
        npm = shutil.which("npm")
        if npm is None:
            raise AssetsUnavailable(f"npm is not installed; needed once to fetch {', '.join(missing)}")
        assets.mkdir(parents=True, exist_ok=True)
        cmd = [
            npm,
            "install",
            "--no-save",
            "--no-audit",
            "--no-fund",
            "--ignore-scripts",
            "--prefix",
            str(assets),
            *specs,
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise AssetsUnavailable(f"{' '.join(cmd)} failed:\n{proc.stdout[-1500:]}{proc.stderr[-1500:]}")
    return assets


def _sri(path: Path, algorithm: str) -> str:
    digest = hashlib.new(algorithm, path.read_bytes()).digest()
    return f"{algorithm}-{base64.b64encode(digest).decode()}"


def localize(html_dir: Path, assets: Path) -> list[str]:
    """Copy the libraries into ``html_dir``/vendor and point index.html at them. Returns the URLs replaced."""
    index = html_dir / "index.html"
    if not index.is_file():
        raise FileNotFoundError(f"{index}: no published HTML (run asv publish first)")
    text = index.read_text()
    vendor = html_dir / "vendor"
    vendor.mkdir(exist_ok=True)
    replaced: list[str] = []
    unknown: list[str] = []

    def rewrite(match: re.Match[str]) -> str:
        url = match.group("url")
        if url not in ASSETS:
            unknown.append(url)
            return match.group(0)
        spec, inner = ASSETS[url]
        source = _package_dir(assets, spec) / inner
        if not source.is_file():
            raise AssetsUnavailable(f"{source} is missing (npm package {spec})")
        local = f"vendor/{spec.rsplit('@', 1)[0]}-{Path(inner).name}"
        shutil.copyfile(source, html_dir / local)
        tag = match.group(0).replace(url, local)
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
            f"{index} loads {', '.join(unknown)}, which asv_bench/offline_html.py does not know: "
            f"add them to ASSETS (asv's HTML changed)"
        )
    write_text_atomic(index, text)
    return replaced


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m asv_bench.offline_html", description=__doc__.split("\n\n")[0])
    parser.add_argument("--html", type=Path, default=REPO_ROOT / ".asv" / "html", help="asv's html_dir")
    parser.add_argument("--assets", type=Path, default=DEFAULT_ASSETS, help="where the npm packages are kept")
    args = parser.parse_args(argv)
    try:
        replaced = localize(args.html, ensure_assets(args.assets))
    except (AssetsUnavailable, FileNotFoundError) as exc:
        print(f"offline_html: {exc}", file=sys.stderr)
        return 2
    print(f"offline_html: {len(replaced)} libraries now load from {args.html / 'vendor'}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
