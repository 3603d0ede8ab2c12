"""Every --help, exit-code table and message states today's behaviour (issue 49, item 7).

The defaults a help lists are read here from the code (the plans of harness.paired.plan, the options' own constants),
never written twice; every example line of every front's --help is parsed by that front, its --plan values checked;
every ``--option`` a help names is an option of some front. Found in issue 49: ``ci.speed --help`` listed version 5's
looks (5,7,10,14,20) as the default, a spending example the gate refused, a ``--calibrate`` flag that no longer
exists, "inconclusive passes unless --fail-on-inconclusive" (it is exit 3), the main job's warning pointing to
``--issues`` (which only ``ci.history.publish`` takes), publish speaking as ``main_job:``, and Ctrl-C's two lines
contradicting each other.
"""

from __future__ import annotations

import contextlib
import importlib
import re
import shlex
from pathlib import Path
from types import SimpleNamespace

import pytest
from test_command_shape import fronts

from ci.common.errors import HarnessError, UsageError
from ci.speed.decide.codes import Status, Stop
from ci.speed.decide.exclusion import DEFAULT_CLOCK_FLOOR_FRACTION
from ci.speed.decide.verdict import exit_code
from ci.speed.options import CALIBRATION_MAX_MINUTES, CALIBRATION_RESTART_EVERY, DEFAULT_MAX_MINUTES
from ci.speed.plan_keys import plan_value
from ci.speed.report.write import inconclusive_policy
from harness.paired.plan import MODEL_PLAN, WARM_PLAN, ZONE_PLAN, ZONE_WARM_PLAN
from harness.paired.verdict import Verdict

ROOT = Path(__file__).resolve().parents[1]
COMMANDS = {  # each front's Command, as ``python -m`` runs it
    "ci.bisect": ("ci.bisect.options", "COMMAND"),
    "ci.budget": ("ci.budget.gate", "COMMAND"),
    "ci.budget.resources": ("ci.budget.resources", "COMMAND"),
    "ci.history": ("ci.history.main_job", "COMMAND"),
    "ci.history.publish": ("ci.history.publish", "COMMAND"),
    "ci.notify": ("ci.notify.front", "COMMAND"),
    "ci.speed": ("ci.speed.gate", "GATE"),
    "ci.speed.calibrate": ("ci.speed.gate", "CALIBRATE"),
    "ci.speed.changes": ("ci.speed.changes", "COMMAND"),
}


def command(front: str):
    module, name = COMMANDS[front]
    return getattr(importlib.import_module(module), name)


def help_of(front: str) -> str:
    return command(front).parser().format_help()


def _csv(values) -> str:
    return ",".join(f"{v:g}" for v in values)


def test_every_front_is_here():
    assert sorted(COMMANDS) == fronts()


# ---------------------------------------------------------------------------
# the listed defaults, from the code
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("front", ["ci.speed", "ci.speed.calibrate"])
def test_the_plan_defaults_in_the_help_are_the_plans(front):
    """The zone rule's plan (ZONE_PLAN, ZONE_WARM_PLAN without a model: the same looks) is the default."""
    assert ZONE_PLAN.look_points == ZONE_WARM_PLAN.look_points and ZONE_PLAN.spending == ZONE_WARM_PLAN.spending
    text = " ".join(help_of(front).split())
    keys = dict(re.findall(r"^  (\w+): (.*)$", command(front).parser().epilog, re.M))
    assert keys["looks"].startswith(f"usable-round counts of the looks ({_csv(ZONE_PLAN.look_points)}; ")
    assert (
        f"rule=band: {_csv(WARM_PLAN.look_points)}, with a noise model {_csv(MODEL_PLAN.look_points)}" in keys["looks"]
    )
    assert keys["min_rounds"].endswith(f"({ZONE_PLAN.min_rounds})")
    assert keys["max_rounds"].endswith(f"({ZONE_PLAN.max_rounds})")
    from ci.speed.plan_keys import DEFAULT_PR_ALPHA  # here: the assertions above run on code that lacks it

    assert keys["pr_alpha"].endswith(f"({DEFAULT_PR_ALPHA})")
    assert f"({ZONE_PLAN.miss_alpha};" in keys["miss_alpha"]
    assert keys["guard_level"].endswith(f"({ZONE_PLAN.guard_level})")
    assert f"(default {_csv(ZONE_PLAN.spending)};" in keys["spending"]
    assert f"({DEFAULT_CLOCK_FLOOR_FRACTION:.0%} of the card's max SM clock" in keys["clock_floor_mhz"]
    assert "5,7,10,14,20)" not in text and "2,3,5,8,12,20)" not in text  # version 5's, listed as the default
    max_minutes = CALIBRATION_MAX_MINUTES if front == "ci.speed.calibrate" else DEFAULT_MAX_MINUTES
    assert f"(default {max_minutes:g}; 0: no limit)" in text


def test_the_spending_example_is_one_the_gate_takes():
    """The help's example was 4,2,1,1,1,1: six shares for eleven looks, refused ("needs one share per look")."""
    from test_speed_options import options_of  # through the gate's front and speed_options

    # The example as the help prints it (not the constant it is built from): what a reader copies.
    example = re.search(r"e\.g\. ([\d.,]+\d)", " ".join(help_of("ci.speed").split()))
    assert example, "the help gives no spending example"
    try:
        options = options_of("--plan", f"spending={example[1]}")
    except HarnessError as refused:
        pytest.fail(f"the help's example spending={example[1]} is refused: {refused}")
    assert options.the_plan().spending == tuple(float(v) for v in example[1].split(","))


def test_the_calibration_states_its_own_cadence_and_rounds():
    from ci.speed.modes.calibration import MAX_CALIBRATION_ROUNDS

    text = " ".join(help_of("ci.speed.calibrate").split())
    assert f"a restart every {CALIBRATION_RESTART_EVERY} rounds, at most {MAX_CALIBRATION_ROUNDS}," in text
    assert f"by default up to {MAX_CALIBRATION_ROUNDS} within --max-minutes" in text


def test_the_docs_plan_table_lists_the_codes_defaults():
    doc = (ROOT / "docs" / "SPEED_GATE.md").read_text()
    rows = {m[0]: m[1] for m in re.findall(r"^\| `(\w+)` \| ([^|]*) \|", doc, re.M)}
    assert rows["looks"].startswith(f"`{_csv(ZONE_PLAN.look_points)}`; band: `{_csv(WARM_PLAN.look_points)}`")
    assert rows["spending"].startswith(f"`{_csv(ZONE_PLAN.spending)}`")
    assert rows["min_rounds"].startswith(f"{ZONE_PLAN.min_rounds};") and rows["max_rounds"].startswith(
        f"{ZONE_PLAN.max_rounds};"
    )


# ---------------------------------------------------------------------------
# every example line runs (through its front's parser and option checks that need no files)
# ---------------------------------------------------------------------------


def examples() -> list[tuple[str, str]]:
    """(front, line) for every line of a front's --help that is a command: it starts with ``python -m ci.``."""
    return [
        (front, line.strip())
        for front in fronts()
        for line in help_of(front).splitlines()
        if line.strip().startswith("python -m ci.")
    ]


def _argv(line: str) -> tuple[str, list[str]]:
    """``python -m MODULE ARGS  # comment`` -> (MODULE, ARGS); ``[optional]`` parts left out."""
    code = re.sub(r"\s+#.*$", "", line)
    code = re.sub(r"\[[^\]]*\]", "", code)
    code = re.sub(r"(?<= )N(?= |$)", "1", code)  # the placeholder of a number (DIR, URL and the like are text)
    words = shlex.split(code)
    assert words[:2] == ["python", "-m"], line
    return words[2], words[3:]


EXAMPLES = examples()


@pytest.mark.parametrize("front, line", EXAMPLES, ids=[e[1][:70] for e in EXAMPLES])
def test_every_example_line_of_a_help_parses_and_its_plan_is_taken(front, line):
    module, argv = _argv(line)
    if module not in COMMANDS:
        pytest.fail(f"{front} --help names python -m {module}, which is not a front")
    parser = command(module).parser()
    try:
        args = parser.parse_args(argv)
    except UsageError as exc:
        pytest.fail(f"{front} --help: {line!r}: {exc}")
    plan_value(getattr(args, "plan", None))  # an example's --plan values are ones the gate takes


def test_there_are_examples_to_run():
    assert len(EXAMPLES) >= 15, EXAMPLES
    assert {f for f, _ in EXAMPLES} == set(fronts())


def _all_options() -> set[str]:
    names: set[str] = set()
    todo = [command(front).parser() for front in fronts()]
    while todo:
        parser = todo.pop()
        for action in parser._actions:
            names.update(action.option_strings)
            if isinstance(action.choices, dict):
                todo.extend(action.choices.values())
    return names


@pytest.mark.parametrize("front", fronts())
def test_every_option_a_help_names_exists(front):
    """``ci.speed.calibrate --help`` named ``--calibrate`` (gone with the calibration's own front)."""
    known = _all_options()
    named = set(re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", help_of(front)))
    assert named <= known, sorted(named - known)


# ---------------------------------------------------------------------------
# the exit codes the speed gate states
# ---------------------------------------------------------------------------


def _inconclusive(rule: str) -> SimpleNamespace:
    return SimpleNamespace(
        status=Status.GATED,
        verdict=Verdict.INCONCLUSIVE,
        decision=SimpleNamespace(rule=rule),
        stopped_by=Stop.TIME_BUDGET,
    )


@pytest.mark.parametrize("rule", ["zone", "band"])
@pytest.mark.parametrize("flag", [False, True])
def test_what_an_inconclusive_benchmark_does_is_what_the_gate_says(rule, flag):
    code = exit_code([_inconclusive(rule)], flag)
    assert code == (1 if flag else 3 if rule == "zone" else 0)
    policy = inconclusive_policy(SimpleNamespace(rule=rule), flag)
    assert (f"exit {code}" in policy) if code else ("pass" in policy), policy
    gate = command("ci.speed")
    table = {c: " ".join(t.split()) for c, t in gate.exits.items()}
    if flag:
        assert "--fail-on-inconclusive, an inconclusive benchmark" in table[1]
    elif rule == "zone":
        assert table[3].startswith("inconclusive under the zone rule") and "--max-minutes" in table[3]
    else:
        assert "inconclusive benchmark under --plan rule=band is a warning" in table[0]
    help_text = " ".join(help_of("ci.speed").split())
    assert "inconclusive passes unless --fail-on-inconclusive" not in help_text
    assert "exit 3 under the zone rule" in help_text and "a measurement failed (the zone plan)" not in help_text


def test_a_replayed_record_that_passes_does_not_say_the_pr_had_failed(tmp_path, capsys):
    """An old record stopped 19 benchmarks once its PR had failed; decided again under rule=band, it passes."""
    from ci.speed import gate

    record = ROOT / "docs" / "data" / "h200_zone" / "layout" / "one_pass.json"
    assert gate.main(["--replay", str(record), "--plan", "rule=band"]) == 0
    out = capsys.readouterr().out
    title = next(line for line in out.splitlines() if line.startswith("### Speed gate: "))
    assert title.startswith("### Speed gate: PASS") and "not decided" in title, title
    assert "the PR had failed)" not in title and "the recorded run's PR had failed" in title, title
    assert "the PR had failed (the regression or wrong result below)" not in out


# ---------------------------------------------------------------------------
# the main job and publish
# ---------------------------------------------------------------------------


def test_the_issue_note_names_the_command_that_takes_issues():
    """The main job's first run ended with a warning pointing to --issues, which ci.history refuses."""
    from ci.history.site import issue_links

    note = issue_links.for_site(None, []).note
    match = re.search(r"python -m ([\w.]+) (--issues) FILE", note)
    assert match, note
    command(match.group(1)).parser().parse_args([match.group(2), "x.json"])  # that front takes it
    with pytest.raises(UsageError):
        command("ci.history").parser().parse_args(["--issues", "x.json"])
    site_build = (ROOT / "ci" / "history" / "site" / "site_build.py").read_text()
    assert 'issues.known or options.issues is None else f"warning: ' in site_build  # none given: a note


def test_publish_speaks_as_publish_not_as_the_main_job(tmp_path, monkeypatch, capsys):
    from ci.history import messages, publish
    from ci.history.site import site_build

    # Put back after the test (speak_as sets it for the process); the code before issue 49 had no such name.
    monkeypatch.setattr(messages, "_prefix", getattr(messages, "_prefix", "main_job"), raising=False)
    monkeypatch.setattr(site_build, "run", lambda options: messages.log("a line of the build") or 0)
    assert publish.main(["--local", "--out", str(tmp_path / "site")]) == 0
    assert capsys.readouterr().err.splitlines() == ["publish: a line of the build"]


def test_an_interrupted_main_job_says_one_consistent_thing(monkeypatch, capsys):
    """Its own line said finished measurements were kept (and, after the commit, claimed nothing was committed);
    the runner's then said "no result"."""
    from ci.common import command as runner
    from ci.common.interrupts import Interrupted
    from ci.history import main_job, run

    monkeypatch.setattr(run.job_process, "start", lambda root, log: SimpleNamespace(id="j"))
    monkeypatch.setattr(run.job_process, "finish", lambda job: [])
    monkeypatch.setattr(run, "log_to", lambda path: None)

    def committed_then_interrupted(options, job, started, jobs):
        jobs.append(SimpleNamespace(branch_state="`asv-results` at abcdef12 (pushed)"))
        raise Interrupted(2)

    monkeypatch.setattr(run, "_steps", committed_then_interrupted)
    monkeypatch.setattr(runner, "_work", lambda cmd, args: run.run(SimpleNamespace(push_results=False)))
    assert main_job.COMMAND.main(["--no-publish"]) == 130
    lines = capsys.readouterr().err.strip().splitlines()
    assert "; the results branch: `asv-results` at abcdef12 (pushed)" in lines[-2]
    assert "nothing was committed" not in lines[-2]
    assert lines[-1].startswith("python -m ci.history: interrupted by SIGINT: ") and "kept in .asv/results" in lines[-1]
    assert "no result" not in lines[-1]
    assert "no result" not in " ".join(help_of("ci.history").split())


def test_a_branch_that_names_nothing_is_refused_before_any_step(monkeypatch):
    """It was found in step 2, as git's own text ("fatal: bad revision")."""
    from ci.history import main_job

    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    with pytest.raises(HarnessError, match=r"--branch 'no-such-branch': no such branch in .*, nor origin/no-such"):
        main_job.COMMAND.checked(["--branch", "no-such-branch"])
    with contextlib.suppress(HarnessError):  # another check may refuse this checkout; not the branch
        main_job.COMMAND.checked(["--branch", "HEAD"])
