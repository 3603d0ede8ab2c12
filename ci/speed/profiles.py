"""The speed gate's runners in one place (``ci/speed_runners.json``): from the GPU name torch reports, that runner's
noise model and policy thresholds (issue 46). The gate, the calibration and the judge find their default files here;
``--noise`` and ``--thresholds`` always win.

A GPU no runner names is an *unknown runner*: the default thresholds, and a noise model only once one has been
calibrated on it (at :func:`unknown_noise_path`); the gate then says so on the first line of its summary.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ci.common.errors import InputError
from ci.common.json_file import JsonFileError, checked_top, read_json
from ci.common.options import name_matches

RUNNERS_PATH = "ci/speed_runners.json"
RUNNERS_SCHEMA = "mxfp4-speed-runners/1"
_TOP_KEYS = {"schema", "about", "runners", "cpu", "unknown"}
_RUNNER_KEYS = {"name", "gpu", "noise", "thresholds", "policy"}
CPU = "cpu"
UNKNOWN = "unknown"


class RunnersFileError(InputError, ValueError):
    """``ci/speed_runners.json`` is malformed; the message names the file and the key."""


@dataclass(frozen=True)
class RunnerProfile:
    """One runner: its name, the GPU name it was found by, its noise model and thresholds (repository paths)."""

    name: str  # "mi355x", "h200"; "cpu"; "unknown"
    gpu: str | None  # the GPU name torch reported (None: a CPU run)
    noise: str  # the noise model's path, relative to the repository (it may not exist yet)
    thresholds: str  # the policy thresholds' path, relative to the repository
    policy: str  # the policy in words

    @property
    def known(self) -> bool:
        """False for a GPU no runner names (a CPU run is known: it has its entry)."""
        return self.name != UNKNOWN

    def first_line(self, model_source: str | None, thresholds_source: str | None = None) -> str | None:
        """The gate summary's first line for a runner it does not know (None for a known one), naming the noise model
        and the thresholds that decided: ``--noise`` and ``--thresholds`` may name other files than the profile's."""
        if self.known:
            return None
        default = f"the default thresholds `{self.thresholds}`"
        given = thresholds_source and not thresholds_source.startswith(self.thresholds)  # "... of the head": default
        thresholds = f"the thresholds `{thresholds_source}`" if given else default
        if model_source is not None:
            return (
                f"**Unknown runner {self.gpu}**: no profile in `{RUNNERS_PATH}`; the noise model calibrated on it "
                f"(`{model_source}`) and {thresholds} decide"
            )
        return (
            f"**Unknown runner {self.gpu}**: no noise model; the gate decides on this run's own rounds "
            f"({thresholds}; add it to `{RUNNERS_PATH}` after `python -m ci.speed.calibrate --write`)"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "gpu": self.gpu,
            "known": self.known,
            "noise": self.noise,
            "thresholds": self.thresholds,
            "policy": self.policy,
        }


def unknown_noise_path(gpu: str) -> str:
    """Where a GPU without a runner keeps its calibrated model: ``ci/speed_noise_<name>.json``, the name in lower case
    with every run of other characters one ``_`` ("NVIDIA H100 80GB HBM3": ``speed_noise_nvidia_h100_80gb_hbm3``)."""
    slug = re.sub(r"[^a-z0-9]+", "_", gpu.lower()).strip("_") or "gpu"
    return f"ci/speed_noise_{slug}.json"


def _text(data: Mapping[str, Any], key: str, where: str) -> str:
    value = data.get(key)
    if not isinstance(value, str) or not value.strip():
        raise RunnersFileError(f"{where}.{key}: must be non-empty text")
    return value


def _patterns(entry: Mapping[str, Any], where: str) -> tuple[str, ...]:
    gpu = entry.get("gpu")
    if not isinstance(gpu, list) or not gpu or not all(isinstance(g, str) and g.strip() for g in gpu):
        raise RunnersFileError(f'{where}.gpu: a list of GPU name patterns (e.g. ["NVIDIA H200*"])')
    return tuple(gpu)


def parse_runners(data: Any, where: str) -> tuple[list[tuple[tuple[str, ...], RunnerProfile]], dict[str, Any]]:
    """Validate the parsed file: ([(patterns, runner)] in order, {"cpu": ..., "unknown": ...})."""
    data = checked_top(data, where, RUNNERS_SCHEMA, _TOP_KEYS, RunnersFileError)
    if not isinstance(data.get("runners"), list):
        raise RunnersFileError(f"{where}: runners: a list of runners")
    runners = []
    for i, entry in enumerate(data["runners"]):
        at = f"{where}: runners[{i}]"
        if not isinstance(entry, dict):
            raise RunnersFileError(f"{at}: expected an object with {sorted(_RUNNER_KEYS)}")
        extra = sorted(set(entry) - _RUNNER_KEYS)
        if extra:
            raise RunnersFileError(f"{at}: unknown key(s) {extra}")
        name = _text(entry, "name", at)
        if name in (CPU, UNKNOWN):
            raise RunnersFileError(f"{at}.name: {name!r} is reserved")
        profile = RunnerProfile(
            name, None, _text(entry, "noise", at), _text(entry, "thresholds", at), _text(entry, "policy", at)
        )
        runners.append((_patterns(entry, at), profile))
    defaults = {}
    for key, needs in ((CPU, ("noise", "thresholds", "policy")), (UNKNOWN, ("thresholds", "policy"))):
        block = data.get(key)
        if not isinstance(block, dict):
            raise RunnersFileError(f"{where}: {key}: an object with {list(needs)}")
        defaults[key] = {k: _text(block, k, f"{where}: {key}") for k in needs}
    return runners, defaults


def load_runners(path: str | Path) -> tuple[list[tuple[tuple[str, ...], RunnerProfile]], dict[str, Any]]:
    try:
        data = read_json(Path(path))
    except JsonFileError as exc:
        raise RunnersFileError(str(exc)) from None
    return parse_runners(data, str(path))


def runner_profile(gpu: str | None, runners_file: str | Path | None = None) -> RunnerProfile:
    """The profile of the runner whose GPU torch names ``gpu`` (None: a CPU run), from ``runners_file`` (default: this
    checkout's ``ci/speed_runners.json``): the first runner with a matching pattern, else the unknown runner's."""
    from ci.common.commit_tree import REPO_ROOT

    runners, defaults = load_runners(runners_file or REPO_ROOT / RUNNERS_PATH)
    if gpu is None:
        cpu = defaults[CPU]
        return RunnerProfile(CPU, None, cpu["noise"], cpu["thresholds"], cpu["policy"])
    for patterns, profile in runners:
        if name_matches(gpu, list(patterns)):
            return RunnerProfile(profile.name, gpu, profile.noise, profile.thresholds, profile.policy)
    other = defaults[UNKNOWN]
    return RunnerProfile(UNKNOWN, gpu, unknown_noise_path(gpu), other["thresholds"], other["policy"])


def known_profiles(runners_file: str | Path | None = None) -> Sequence[RunnerProfile]:
    """Every named runner, in the file's order (the judge looks a record's GPU up among them)."""
    from ci.common.commit_tree import REPO_ROOT

    return [profile for _, profile in load_runners(runners_file or REPO_ROOT / RUNNERS_PATH)[0]]
