"""Culprit bisection of main's first-parent line (issue 20): ``python -m ci.bisect`` (README.md's layout table). The
block below: ``ci/bisect`` shadows the standard library's ``bisect`` for a command run from inside ci/."""

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
