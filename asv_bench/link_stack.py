"""Let an asv environment see the Python that has the heavy stack (torch, triton, flydsl, nvidia-ml-py).

asv installs only the project into its per-configuration virtualenv (``--no-deps``). Run by asv's
``install_command`` with the environment's python, this writes ``mxfp4_stack.pth`` into its
site-packages listing the stack's site-packages (after the environment's own: the commit's project
wins). The stack's python, first found: ``$MXFP4_STACK_PYTHON``, ``$VIRTUAL_ENV/bin/python``,
``<repository>/.venv/bin/python``; with none, system site-packages alone. Why not
``VIRTUALENV_SYSTEM_SITE_PACKAGES`` alone: docs/MEASURING.md, "The heavy stack in asv's environments".
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

# Run as a script by asv's install_command: this checkout's root is not on the path yet.
sys.path.append(str(Path(__file__).resolve().parents[1]))
from harness.report import write_text_atomic  # noqa: E402

PTH_NAME = "mxfp4_stack.pth"


def stack_python(environ: dict[str, str], repo_root: Path) -> Path | None:
    candidates = [
        environ.get("MXFP4_STACK_PYTHON"),
        environ.get("VIRTUAL_ENV") and str(Path(environ["VIRTUAL_ENV"]) / "bin" / "python"),
        str(repo_root / ".venv" / "bin" / "python"),
    ]
    for candidate in candidates:
        if candidate and Path(candidate).is_file():
            return Path(candidate)
    if environ.get("MXFP4_STACK_PYTHON"):
        raise SystemExit(f"link_stack: MXFP4_STACK_PYTHON={environ['MXFP4_STACK_PYTHON']} is not a file")
    return None


def site_dirs_of(python: Path) -> tuple[tuple[int, int], list[str]]:
    probe = (
        "import json, sys, sysconfig; "
        "print(json.dumps([sys.version_info[:2], "
        "[sysconfig.get_paths()['purelib'], sysconfig.get_paths()['platlib']]]))"
    )
    out = subprocess.run([str(python), "-c", probe], check=True, capture_output=True, text=True).stdout
    version, dirs = json.loads(out)
    unique = [d for i, d in enumerate(dirs) if d not in dirs[:i] and Path(d).is_dir()]
    return tuple(version), unique


def main() -> int:
    repo_root = Path(os.environ.get("ASV_CONF_DIR") or Path(__file__).resolve().parents[1])
    python = stack_python(dict(os.environ), repo_root)
    env_site = Path(sysconfig.get_paths()["purelib"])
    target = env_site / PTH_NAME
    if python is None:
        print("link_stack: no stack interpreter found; relying on system site-packages", file=sys.stderr)
        target.unlink(missing_ok=True)
        return 0
    version, dirs = site_dirs_of(python)
    if tuple(version) != sys.version_info[:2]:
        print(
            f"link_stack: the stack at {python} is Python {version[0]}.{version[1]}, this asv environment is "
            f"{sys.version_info[0]}.{sys.version_info[1]}: set asv.conf.json 'pythons' (or run asv with that python)",
            file=sys.stderr,
        )
        return 2
    dirs = [d for d in dirs if Path(d).resolve() != env_site.resolve()]
    write_text_atomic(target, "".join(f"{d}\n" for d in dirs))
    print(f"link_stack: {target} -> {', '.join(dirs)} (from {python})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
