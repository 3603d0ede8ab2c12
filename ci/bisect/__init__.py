"""Culprit bisection of main's first-parent line (issue 20): ``python -m ci.bisect --good A --bad B --benchmark ID``.

options.py is the front (argparse -> :class:`ci.bisect.options.BisectOptions`); engine.py the bisection,
which sees commits, a fingerprint key and a measurer, nothing else; measurer.py the real measurer (the speed
gate's interleaved A/B engine, run as ``python -m ci.speed ... --json``) and the real fingerprint key;
change_point.py reads good, bad and the benchmark from a change point of the main job's JSON
(``--from-change-point``); report.py the Markdown step summary and the JSON.

The package is named ``bisect`` as issue 20 names the command. A command run from inside ci/ has ci/ first on
sys.path, so ``import bisect`` there (numpy, random and git do it) finds this package instead of the standard
library's; the block below then loads the standard library's module in its place, so every command still works
from every directory (tests/test_harness_boundary.py runs them from ci/).
"""

if __name__ == "bisect":  # imported as the standard library's bisect, from inside ci/: become that module
    import importlib.util as _util
    import sys as _sys
    import sysconfig as _sysconfig
    from pathlib import Path as _Path

    _spec = _util.spec_from_file_location("bisect", _Path(_sysconfig.get_paths()["stdlib"]) / "bisect.py")
    assert _spec is not None and _spec.loader is not None, "a file location always gives a spec with a loader"
    _stdlib_bisect = _util.module_from_spec(_spec)
    _sys.modules["bisect"] = _stdlib_bisect  # the import statement returns what sys.modules holds after this runs
    _spec.loader.exec_module(_stdlib_bisect)
