"""The storage package's layout: parts in folders, no import circle, no test code installed.

Imports are read from the source (every ``import`` statement, those inside functions too, not
those under ``if TYPE_CHECKING:``), so a lazy import that closes a circle is caught as well as
a top-level one.
"""
import ast
import pathlib

import mmgrasp.storage

STORAGE = pathlib.Path(mmgrasp.storage.__file__).parent
PARTS = {'labels', 'readers', 'frames', 'remote'}
SHARED = {'__init__', 'source', 'derived_assets', 'secrets'}


def _module_name(path: pathlib.Path) -> str:
    parts = path.relative_to(STORAGE.parent.parent).with_suffix('').parts
    return '.'.join(parts[:-1] if parts[-1] == '__init__' else parts)


def _imports(path: pathlib.Path, modules: dict) -> set:
    """The mmgrasp.storage modules ``path`` imports: ``from .x import y`` imports module ``x.y``
    where that is a module, else module (or package) ``x``."""
    module = _module_name(path)
    package = module if path.name == '__init__.py' else module.rpartition('.')[0]
    tree = ast.parse(path.read_text())
    typing_only = {id(n) for block in ast.walk(tree) if isinstance(block, ast.If)
                   and getattr(block.test, 'id', None) == 'TYPE_CHECKING' for n in ast.walk(block)}
    found = set()
    for node in ast.walk(tree):
        if id(node) in typing_only:  # annotations only: never imported at run time
            continue
        if isinstance(node, ast.ImportFrom):
            base = node.module or ''
            if node.level:
                anchor = package.split('.')[:len(package.split('.')) - node.level + 1]
                base = '.'.join(anchor + ([base] if base else []))
            names = [f'{base}.{a.name}' if f'{base}.{a.name}' in modules else base
                     for a in node.names]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            continue
        found.update(n for n in names if n.startswith('mmgrasp.storage'))
    return found


def _graph() -> dict:
    """module -> the storage modules it imports (its own parent packages left out: importing a
    submodule runs them first, which is no circle)."""
    modules = {_module_name(p): p for p in STORAGE.rglob('*.py')}
    graph = {}
    for name, path in modules.items():
        graph[name] = {m for m in _imports(path, modules)
                       if m in modules and m != name and not name.startswith(m + '.')}
    return graph


def _cycle(graph: dict):
    state, stack = {}, []

    def visit(node):
        state[node] = 'open'
        stack.append(node)
        for target in sorted(graph[node]):
            if state.get(target) == 'open':
                return stack[stack.index(target):] + [target]
            if target not in state:
                found = visit(target)
                if found:
                    return found
        state[node] = 'done'
        stack.pop()
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def test_storage_has_no_import_circle():
    graph = _graph()
    assert 'mmgrasp.storage.readers.cells' in graph and graph['mmgrasp.storage.readers.cells']
    assert _cycle(graph) is None, ' -> '.join(_cycle(graph))


def test_the_cycle_finder_sees_a_lazy_import_circle():
    graph = _graph()
    graph['mmgrasp.storage.remote.store'] = graph['mmgrasp.storage.remote.store'] | {
        'mmgrasp.storage.readers.cells'}  # the kind of import the old readers had
    assert _cycle(graph) is not None


def test_parts_are_folders_and_no_reader_uses_another_modules_privates():
    flat = {p.stem for p in STORAGE.glob('*.py')}
    folders = {p.name for p in STORAGE.iterdir() if p.is_dir() and p.name != '__pycache__'}
    assert flat == SHARED and folders == PARTS
    for path in STORAGE.rglob('*.py'):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.level or 'storage' in (node.module or '')):
                private = [a.name for a in node.names if a.name.startswith('_')]
                assert not private, f'{path.relative_to(STORAGE)} imports private {private}'


def test_no_test_server_in_the_installed_package():
    sources = [p.read_text() for p in STORAGE.parent.rglob('*.py')]
    assert not any('BaseHTTPRequestHandler' in text for text in sources)
