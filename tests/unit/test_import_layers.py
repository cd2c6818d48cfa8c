"""The import structure of the whole package: no circle, no import from a lower layer to a
higher one, in the layer order that docs/advanced_guides/architecture.md writes (read from
there, so the doc and the test cannot drift).

Every import statement counts: top-level ones, lazy ones inside functions and those under
``if TYPE_CHECKING:`` (``ast.walk`` sees them all), relative ones resolved against the module's
package. Importing ``a.b.c`` also runs the packages ``a.b`` and ``a`` first, so an import
reaches those ``__init__`` modules too, except the importer's own packages (already running)
and the root ``mmgrasp`` (run before anything; it is checked as a module of the first layer).
"""
import ast
import pathlib
import re
import subprocess
import sys
from typing import Dict, List, Set

import mmgrasp

PACKAGE = pathlib.Path(mmgrasp.__file__).parent
DOC = PACKAGE.parent / 'docs' / 'advanced_guides' / 'architecture.md'


def layer_order(doc: pathlib.Path = DOC) -> List[List[str]]:
    """The layers of the doc's ``## Layer order`` list, lowest first: the backticked names of
    each line that starts with a number."""
    text = doc.read_text()
    section = text.split('## Layer order', 1)[1].split('\n## ', 1)[0]
    layers = []
    for line in section.splitlines():
        match = re.match(r'(\d+)\. ((?:`\w+`\s*)+)', line)
        if match:
            assert int(match.group(1)) == len(layers) + 1, f'{doc}: layer list out of order'
            layers.append(re.findall(r'`(\w+)`', match.group(2)))
    return layers


def module_paths(root: pathlib.Path) -> Dict[str, pathlib.Path]:
    """Dotted name -> file of every module under ``root`` (the package's folder)."""
    modules = {}
    for path in sorted(root.rglob('*.py')):
        parts = path.relative_to(root.parent).with_suffix('').parts
        modules['.'.join(parts[:-1] if parts[-1] == '__init__' else parts)] = path
    return modules


def imported_modules(name: str, path: pathlib.Path, modules: Dict[str, pathlib.Path]) -> Set[str]:
    """The package's modules that importing module ``name`` (file ``path``) may run."""
    root = name.split('.')[0]
    package = name if path.name == '__init__.py' else name.rpartition('.')[0]
    targets = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ''
            if node.level:
                anchor = package.split('.')[:len(package.split('.')) - node.level + 1]
                base = '.'.join(anchor + ([base] if base else []))
            # 'from x import y' imports module x.y where there is one, else takes y from x
            targets.update(f'{base}.{a.name}' if f'{base}.{a.name}' in modules else base
                           for a in node.names)
    own = {'.'.join(name.split('.')[:i]) for i in range(1, name.count('.') + 1)}
    reached = set()
    for target in targets:
        parts = target.split('.')
        if parts[0] != root:
            continue
        while '.'.join(parts) not in modules:  # 'import a.b.name' of an attribute
            parts.pop()
        reached.add('.'.join(parts))
        reached.update('.'.join(parts[:i]) for i in range(2, len(parts))
                       if '.'.join(parts[:i]) not in own)  # the packages it runs first
    reached.discard(name)
    return reached


def import_graph(root: pathlib.Path = PACKAGE) -> Dict[str, Set[str]]:
    modules = module_paths(root)
    return {name: imported_modules(name, path, modules) for name, path in modules.items()}


def circles(graph: Dict[str, Set[str]]) -> List[List[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10 * len(graph) + 100))
    try:
        for node in sorted(graph):
            if node not in index:
                visit(node)
    finally:
        sys.setrecursionlimit(limit)
    return found


def layer_of(module: str, layers: List[List[str]]) -> int:
    """The module's layer number (0: the lowest); the root package is in the first layer."""
    parts = module.split('.')
    if len(parts) == 1:
        return 0
    for rank, names in enumerate(layers):
        if parts[1] in names:
            return rank
    raise KeyError(f'{module}: mmgrasp.{parts[1]} is in no layer of {DOC}')


def back_arrows(graph: Dict[str, Set[str]], layers: List[List[str]]) -> List[str]:
    """Every import from a lower layer to a higher one, as 'importer -> imported'."""
    return sorted(f'{a} -> {b}' for a, targets in graph.items() for b in targets
                  if layer_of(b, layers) > layer_of(a, layers))


def test_the_doc_lists_every_top_level_package_once():
    layers = layer_order()
    listed = [name for layer in layers for name in layer]
    assert len(listed) == len(set(listed)), listed
    present = {p.stem if p.is_file() else p.name for p in PACKAGE.iterdir()
               if (p.suffix == '.py' and p.stem != '__init__') or (p / '__init__.py').is_file()}
    assert set(listed) == present, (sorted(set(listed) - present), sorted(present - set(listed)))
    assert listed[:1] == ['registry'] and layers[-2:] == [['apis'], ['analysis']]


def test_no_import_circle():
    graph = import_graph()
    assert 'mmgrasp.ops.sparse_conv' in graph['mmgrasp.models.backbones.sparse_unet']
    assert not circles(graph), circles(graph)


def test_no_import_runs_up_the_layers():
    graph = import_graph()
    assert not back_arrows(graph, layer_order()), back_arrows(graph, layer_order())


def test_the_checks_catch_a_planted_back_arrow_and_circle():
    graph = import_graph()
    layers = layer_order()
    planted = {k: set(v) for k, v in graph.items()}
    planted['mmgrasp.geometry.points'].add('mmgrasp.evaluation.functional.frame_eval')
    assert back_arrows(planted, layers) == [
        'mmgrasp.geometry.points -> mmgrasp.evaluation.functional.frame_eval']
    planted = {k: set(v) for k, v in graph.items()}
    planted['mmgrasp.ops.sparse_tensor'].add('mmgrasp.ops.sparse_conv')
    assert circles(planted) == [['mmgrasp.ops.sparse_conv', 'mmgrasp.ops.sparse_tensor',
                                 'mmgrasp.ops.spconv_backend']]  # the old circle, back
    assert not back_arrows(planted, layers)  # a circle inside one layer: only circles() sees it


def test_the_parser_sees_lazy_type_only_and_relative_imports(tmp_path):
    """A small package where the only imports closing a circle and running up are a lazy one,
    one under TYPE_CHECKING and a package import that reaches an __init__."""
    files = {
        'mmgrasp/__init__.py': '',
        'mmgrasp/registry.py': '',
        'mmgrasp/geometry/__init__.py': 'from .a import f\n',
        'mmgrasp/geometry/a.py': 'def f():\n    from ..evaluation.b import g\n    return g\n',
        'mmgrasp/evaluation/__init__.py': 'from mmgrasp.evaluation import c  # noqa\n',
        'mmgrasp/evaluation/b.py': ('from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n'
                                    '    from mmgrasp.geometry.a import f\n'),
        'mmgrasp/evaluation/c.py': 'import mmgrasp.registry\n',
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    graph = import_graph(tmp_path / 'mmgrasp')
    assert graph['mmgrasp.geometry.a'] == {'mmgrasp.evaluation', 'mmgrasp.evaluation.b'}
    assert graph['mmgrasp.evaluation.b'] == {'mmgrasp.geometry', 'mmgrasp.geometry.a'}
    assert graph['mmgrasp.evaluation'] == {'mmgrasp.evaluation.c'}
    assert graph['mmgrasp.evaluation.c'] == {'mmgrasp.registry'}
    assert circles(graph) == [['mmgrasp.evaluation.b', 'mmgrasp.geometry', 'mmgrasp.geometry.a']]
    assert back_arrows(graph, [['registry'], ['geometry'], ['evaluation']]) == [
        'mmgrasp.geometry.a -> mmgrasp.evaluation', 'mmgrasp.geometry.a -> mmgrasp.evaluation.b']


def test_no_module_imports_another_modules_private_name():
    offenders = []
    for path in PACKAGE.rglob('*.py'):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (
                    node.level or (node.module or '').split('.')[0] == 'mmgrasp'):
                offenders += [f'{path.relative_to(PACKAGE)}: {a.name}' for a in node.names
                              if a.name.startswith('_') and not a.name.startswith('__')]
    assert not offenders, offenders


def test_importing_the_lower_layers_loads_no_layer_above_them():
    """The run-time view of the same order: importing geometry, ops and storage (the root
    package included) loads nothing of the layers above storage."""
    layers = layer_order()
    below = [name for layer in layers[:layer_of('mmgrasp.storage', layers) + 1] for name in layer]
    above = tuple(f'mmgrasp.{name}' for layer in layers[layer_of('mmgrasp.storage', layers) + 1:]
                  for name in layer)
    code = (f'import sys, importlib; [importlib.import_module("mmgrasp." + n) for n in {below!r}]; '
            f'print(sorted(m for m in sys.modules if m.startswith({above!r})))')
    out = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == '[]', out
