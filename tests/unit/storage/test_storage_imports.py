"""The storage layer stands alone: nothing in mmgrasp/storage imports the dataset or model code."""
import ast
import os

import mmgrasp.storage

FORBIDDEN = ('mmgrasp.datasets', 'mmgrasp.models', 'mmgrasp.structures', 'mmgrasp.engine')


def test_storage_imports_no_dataset_or_model_code():
    folder = os.path.dirname(mmgrasp.storage.__file__)
    imported = []
    for name in sorted(os.listdir(folder)):
        if not name.endswith('.py'):
            continue
        with open(os.path.join(folder, name)) as f:
            tree = ast.parse(f.read())
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                imported += [(name, alias.name) for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                module = node.module or ''
                if node.level > 1:  # from .. import x: climbs out of the package
                    module = 'mmgrasp.' + module
                imported.append((name, module))
    assert imported, 'no imports found: the scan is broken'
    bad = [(f, m) for f, m in imported if m.startswith(FORBIDDEN)]
    assert bad == []
