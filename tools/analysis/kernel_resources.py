"""Compile every Triton kernel of mmgrasp for real GPU targets, without a GPU, and report its
registers, spills and shared memory.

Kernels are found by introspection: every ``@triton.jit`` function of every module under
``mmgrasp/``. Each module that defines kernels lists its launches in ``LAUNCHES`` (the table its
wrappers launch through, see ``mmgrasp/ops/point_kernels.py``); every entry is
compiled with ``triton.compile(ASTSource(...), target=GPUTarget('cuda', cc, 32))``, which runs the
``ptxas`` that Triton ships in its wheel. A kernel that no entry launches and no launched kernel
uses (calls, or names as a reduction's combine function), directly or through a helper it uses,
is reported as ``uncovered``.
Registers and local memory are read from the cubin (``cuobjdump --dump-resource-usage``): on a
GPU Triton reads the same two values from the driver (``n_regs``; ``n_spills`` = local bytes /
4); shared memory is Triton's ``metadata.shared``.

Run it with ``TRITON_INTERPRET`` unset (the interpreter replaces kernels by Python functions)::

    python tools/analysis/kernel_resources.py [--json OUT]
"""
import argparse
import importlib
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Dict, List

ROOT = Path(__file__).resolve().parents[2]
TARGETS = (80, 89, 90)  # A100, L40/RTX 4090, H100/H200


def discover() -> Dict[str, list]:
    """Module name -> its @triton.jit functions, checked against the decorators in its text."""
    from triton.runtime.jit import JITFunction
    found = {}
    for path in sorted((ROOT / 'mmgrasp').rglob('*.py')):
        text = path.read_text()
        decorated = len(re.findall(r'^@triton\.jit\b', text, flags=re.M))
        if not decorated:
            continue
        name = '.'.join(path.relative_to(ROOT).with_suffix('').parts)
        module = importlib.import_module(name)
        kernels = [obj for obj in vars(module).values()
                   if isinstance(obj, JITFunction) and obj.fn.__module__ == name]
        if len(kernels) != decorated:
            raise RuntimeError(f'{path}: {decorated} @triton.jit decorators, but '
                               f'{len(kernels)} kernels found by import')
        found[name] = kernels
    return found


def _resources(cubin: bytes) -> Dict[str, int]:
    import triton
    tool = Path(triton.__file__).parent / 'backends' / 'nvidia' / 'bin' / 'cuobjdump'
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / 'kernel.cubin'
        path.write_bytes(cubin)
        text = subprocess.run([str(tool), '--dump-resource-usage', str(path)], check=True,
                              capture_output=True, text=True).stdout
    usage = dict(re.findall(r'\b(REG|STACK|SHARED|LOCAL):(\d+)', text))
    return {key: int(value) for key, value in usage.items()}


def compile_entry(entry, cc: int) -> Dict[str, object]:
    """Compile one LAUNCHES entry for sm_<cc>; its resource use or its compile error."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    fn = entry.kernel
    runtime = [name for i, name in enumerate(fn.arg_names)
               if not fn.params[i].is_constexpr]
    row = dict(kernel=fn.__name__, target=f'sm_{cc}',
               variant=', '.join(f'{k}={v}' for k, v in entry.constexprs.items()))
    if runtime != list(entry.signature) or \
            set(fn.arg_names) - set(runtime) != set(entry.constexprs):
        row['error'] = (f'LAUNCHES entry names {list(entry.signature)} + '
                        f'{list(entry.constexprs)}, the kernel takes {fn.arg_names}')
        return row
    signature = dict(entry.signature, **{name: 'constexpr' for name in entry.constexprs})
    try:
        compiled = triton.compile(ASTSource(fn, signature, dict(entry.constexprs)),
                                  target=GPUTarget('cuda', cc, 32), options=entry.options)
    except Exception as error:  # noqa: BLE001 -- reported per entry, the caller fails on it
        row['error'] = f'{type(error).__name__}: {error}'
        return row
    usage = _resources(compiled.asm['cubin'])
    row.update(n_regs=usage['REG'], n_spills=usage['LOCAL'] // 4, local_bytes=usage['LOCAL'],
               stack_bytes=usage['STACK'], shared=compiled.metadata.shared,
               num_warps=compiled.metadata.num_warps)
    return row


def uncovered(kernels: list, launches: tuple) -> List[str]:
    """The kernels that no entry of ``launches`` launches, nor a launched kernel uses (calls,
    or names as a reduction's combine function), directly or through the helpers it uses."""
    covered = {entry.kernel for entry in launches}
    while True:
        sources = [kernel.src for kernel in covered]
        used = {kernel for kernel in kernels if kernel not in covered
                and any(re.search(rf'\b{kernel.__name__}\b', src) for src in sources)}
        if not used:
            return [kernel.__name__ for kernel in kernels if kernel not in covered]
        covered |= used


def report(targets=TARGETS) -> Dict[str, List]:
    """Compile every launch of every kernel module for ``targets``."""
    rows, missing = [], []
    for name, kernels in discover().items():
        launches = getattr(sys.modules[name], 'LAUNCHES', ())
        missing += [f'{name}.{kernel}' for kernel in uncovered(kernels, launches)]
        for entry in launches:
            for cc in targets:
                rows.append(compile_entry(entry, cc))
    return dict(rows=rows, uncovered=missing)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--json', help='write the report here as JSON')
    args = parser.parse_args()
    if os.environ.get('TRITON_INTERPRET', '0') not in ('', '0'):
        sys.exit('unset TRITON_INTERPRET: the interpreter compiles nothing')
    result = report()
    print(f'{"kernel":24} {"variant":28} {"target":6} {"regs":>4} {"spills":>6} {"shared":>6}')
    for row in result['rows']:
        if 'error' in row:
            print(f'{row["kernel"]:24} {row["variant"]:28} {row["target"]:6} '
                  f'ERROR {row["error"].splitlines()[0][:300]}')
        else:
            print(f'{row["kernel"]:24} {row["variant"]:28} {row["target"]:6} '
                  f'{row["n_regs"]:>4} {row["n_spills"]:>6} {row["shared"]:>6}')
    for name in result['uncovered']:
        print(f'{name}: no LAUNCHES entry launches it or calls it')
    if args.json:
        tmp = Path(args.json).with_suffix('.tmp')
        tmp.write_text(json.dumps(result, indent=1))
        tmp.replace(args.json)


if __name__ == '__main__':
    sys.path.insert(0, str(ROOT))
    main()
