"""What ci.speed.changes and the gate say besides code: changed dependency pins, benchmarks removed at head.

Fast: a temporary git repository with two commits of pyproject.toml and
ci/constraints-cpu.txt, and hand-made fingerprints (no compile).
"""

from __future__ import annotations

import git

from ci.common.code_fingerprint import Fingerprint, Outcome, Part, TreeFingerprints, compare
from ci.speed.decide.codes import Status
from ci.speed.decide.selection import Selector
from ci.speed.scope import dependencies, summary, unchanged

PYPROJECT = """[project]
name = "x"
dependencies = [
    "torch>=2.4",
    "numpy>=1.24",  # a comment
    'scipy>=1.11',
]

[project.optional-dependencies]
dev = ["pytest==8.0"]
"""
CONSTRAINTS = "# pins\ntorch==2.13.0\ntriton==3.9.0\nasv-runner==0.3.2\n"


def _repo(tmp_path, files_by_commit):
    repo = git.Repo.init(tmp_path / "repo", initial_branch="main")
    shas = []
    for files in files_by_commit:
        for rel, text in files.items():
            path = tmp_path / "repo" / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        repo.git.add(A=True)
        shas.append(repo.index.commit(f"c{len(shas)}").hexsha)
    return repo, shas


def test_changed_pins_are_named_from_both_files(tmp_path):
    head_pyproject = PYPROJECT.replace('"numpy>=1.24"', '"numpy>=2.0"').replace('"pytest==8.0"', '"pytest==9.0"')
    head_constraints = (
        CONSTRAINTS.replace("torch==2.13.0", "torch==2.14.0").replace("asv-runner==0.3.2\n", "") + "scipy==1.17.1\n"
    )
    repo, (c0, c1, c2) = _repo(
        tmp_path,
        [
            {"pyproject.toml": PYPROJECT, "ci/constraints-cpu.txt": CONSTRAINTS, "README.md": "a"},
            {"README.md": "b"},  # docs only
            {"pyproject.toml": head_pyproject, "ci/constraints-cpu.txt": head_constraints},
        ],
    )
    assert dependencies.dependency_changes(repo, c0, c1) == []
    found = dependencies.dependency_changes(repo, c1, c2)
    # The optional (dev) dependency is not a runtime pin: not reported.
    assert found == [
        "numpy >=1.24 -> >=2.0 in pyproject.toml",
        "asv-runner 0.3.2 removed",
        "scipy 1.17.1 (new)",
        "torch 2.13.0 -> 2.14.0",
    ]
    assert dependencies.dependency_changes(repo, None, c2) == []  # no base: nothing to compare
    (line, _) = dependencies.warning_lines(["torch 2.13.0 -> 2.14.0"])
    assert (
        "this PR changes pinned dependencies (torch 2.13.0 -> 2.14.0); the gate measures both sides in the "
        "runner's one environment, so their effect is not measured here" in line
    )
    assert dependencies.warning_lines([]) == []


def test_the_working_tree_is_read_for_a_working_tree_head(tmp_path):
    repo, (c0,) = _repo(tmp_path, [{"pyproject.toml": PYPROJECT, "ci/constraints-cpu.txt": CONSTRAINTS}])
    (tmp_path / "repo/ci/constraints-cpu.txt").write_text(CONSTRAINTS.replace("triton==3.9.0", "triton==3.10.0"))
    assert dependencies.dependency_changes(repo, c0, None) == ["triton 3.9.0 -> 3.10.0"]


def test_the_projects_own_files_parse():
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    deps = dependencies.pyproject_dependencies((root / "pyproject.toml").read_text())
    pins = dependencies.requirements((root / "ci/constraints-cpu.txt").read_text())
    assert "torch" in deps and "scipy" in deps and pins["torch"].startswith("==")


# ---------------------------------------------------------------------------
# removed at head
# ---------------------------------------------------------------------------


def _tree(kernels):
    """Fingerprints of ``{kernel: launch digest}``, one config "c", one shape, arch sm_90."""
    fps, listed = {}, []
    for kernel, digest in kernels.items():
        fps[(kernel, "c", "sm_90")] = Fingerprint(kernel, "c", "sm_90", Part(digest), Part("code-" + kernel))
        listed.append({"kernel": kernel, "config": "c", "shape": "s", "m": 256, "n": 256, "k": 256})
    return TreeFingerprints(fps, {"sm_90": listed}, {})


def test_a_kernel_only_at_the_base_is_removed_at_head_not_dropped():
    base, head = _tree({"kept": "a", "gone": "b"}), _tree({"kept": "a"})
    results = compare(base, head)["sm_90"]
    assert results["gone[c]/s"].outcome is Outcome.REMOVED and results["gone[c]/s"].describe() == "removed at head"
    assert results["kept[c]/s"].outcome is Outcome.IDENTICAL
    data = summary.report_data("b" * 40, "h" * 40, base, head, compare(base, head), None)
    assert data["removed"] == ["gone[c]/s"] and data["unchanged"] == ["kept[c]/s"] and data["to_measure"] == []
    assert data["gpu_needed"] is False and data["gpu_needed_by_arch"] == {"sm_90": False}  # a removal needs no GPU
    assert [b["kernel"] for b in data["removed_by_arch"]["sm_90"]] == ["gone"]
    text = summary.markdown(data)
    assert any(line.split("|")[1:3] == [" gone[c]/s   ", " removed at head            "] for line in text.splitlines())
    assert "(0 to measure, 1 unchanged, 1 removed at head)" in text

    decision = unchanged.decision_from_data(data, "sm_90", "--arch sm_90", False)
    assert decision.pairs == {("kept", "c"): (True, "unchanged (identical code)")}  # the removed one is neither
    (entry,) = unchanged.removed_entries(decision, Selector.of())
    assert (
        entry.benchmark.id == "gone[c]/s" and entry.status is Status.REMOVED and entry.note == "removed at head (sm_90)"
    )
    assert unchanged.removed_entries(decision, Selector.of(["kept"])) == []  # selectors apply
    assert unchanged.removed_entries(decision, Selector.of(shapes=["256x256x256"])) == [entry]


def test_a_compact_preface_when_nothing_is_measured():
    base, head = _tree({"kept": "a", "gone": "b"}), _tree({"kept": "a"})
    data = summary.report_data("b" * 40, "h" * 40, base, head, compare(base, head), None)
    decision = unchanged.decision_from_data(data, "sm_90", "--arch sm_90", False)
    skipped = unchanged.unchanged_entries(decision, Selector.of())
    costs = unchanged.cost_record(decision, skipped, [], unchanged.removed_entries(decision, Selector.of()))
    lines = unchanged.preface_lines(decision, [], costs, ["torch 2.13.0 -> 2.14.0"])
    text = "\n".join(lines)
    assert costs["removed_at_head"] == ["gone[c]/s"]
    assert (
        "every selected benchmark has identical code (1 removed at head): nothing measured, 0 GPU seconds, ~10 s saved"
        in text
    )
    assert "pinned dependencies (torch 2.13.0 -> 2.14.0)" in text and "GPU runner time:" not in text and "|" not in text
