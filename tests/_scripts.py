"""The repository's scripts (tools/..., demo/...) imported as modules, for tests that call their
functions in the test process instead of starting an interpreter.

Importable from every test folder as ``from _scripts import script_module``: tests/ is on
``sys.path`` for the whole run (pytest's default import mode puts the folder of the root
``tests/conftest.py`` there, as it does for ``servers``).
"""
import importlib.util
import os

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def script_module(relpath: str):
    """``relpath`` (from the repository root, e.g. ``'tools/test.py'``) imported as a new module
    named after the file, on every call: the scripts are not a package, and a fresh module keeps
    one test's changes to its globals (or its ``lru_cache``s) away from the next; it is not put
    in ``sys.modules``, so two scripts of one name never meet there."""
    path = os.path.join(REPO, relpath)
    spec = importlib.util.spec_from_file_location(os.path.splitext(os.path.basename(path))[0],
                                                  path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
