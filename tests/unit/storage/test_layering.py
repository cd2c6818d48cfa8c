"""Storage sits below datasets and models: importing it loads neither, and no storage module
names them (a lazy import inside a function would hide from the first check)."""
import ast
import pathlib
import subprocess
import sys

import mmgrasp.storage

STORAGE = pathlib.Path(mmgrasp.storage.__file__).parent
ABOVE = ('mmgrasp.datasets', 'mmgrasp.models', 'mmgrasp.structures', 'mmgrasp.evaluation',
         'mmgrasp.apis', 'mmgrasp.engine')


def _imported_modules(path: pathlib.Path):
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve against mmgrasp.storage
                base = 'mmgrasp.storage' if node.level == 1 else 'mmgrasp'
                yield f'{base}.{node.module}' if node.module else base
            else:
                yield node.module


def test_no_storage_module_imports_a_layer_above():
    offenders = {f'{path.name}: {name}' for path in STORAGE.rglob('*.py')
                 for name in _imported_modules(path) if name.startswith(ABOVE)}
    assert not offenders, sorted(offenders)


def test_importing_storage_loads_no_layer_above():
    code = ('import sys, mmgrasp.storage; '
            f'print(sorted(m for m in sys.modules if m.startswith({ABOVE!r})))')
    out = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == '[]', out


def test_the_check_sees_an_upward_import(tmp_path):
    bad = tmp_path / 'bad.py'
    bad.write_text('from ..datasets.graspnet_reader import GraspNetReader\n')
    assert 'mmgrasp.datasets.graspnet_reader' in set(_imported_modules(bad))
