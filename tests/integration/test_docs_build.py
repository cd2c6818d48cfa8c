"""The documentation site builds with warnings as errors, as CI runs it, and what it renders is
the real content: every method page of the model index (its README included), the API
reference generated from the docstrings, the storage layouts from the modules' docstrings."""
import os
import re
import subprocess
import sys

import pytest
import yaml

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

pytest.importorskip('sphinx', reason="the documentation build needs the 'tests' extra")
pytest.importorskip('myst_parser', reason="the documentation build needs the 'tests' extra")


@pytest.mark.slow
def test_the_docs_build_without_warnings(tmp_path):
    html, doctrees = tmp_path / 'html', tmp_path / 'doctrees'
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get('PYTHONPATH', ''))
    done = subprocess.run(
        [sys.executable, '-m', 'sphinx', '-W', '--keep-going', '-q', '-b', 'html',
         '-d', str(doctrees), 'docs', str(html)],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-6000:]

    with open(os.path.join(REPO, 'model-index.yml')) as f:
        metafiles = yaml.safe_load(f)['Import']
    for metafile in metafiles:
        method = os.path.basename(os.path.dirname(metafile))
        page = (html / 'model_zoo' / f'{method}.html').read_text()
        with open(os.path.join(REPO, 'configs', method, 'README.md')) as f:
            title = f.readline().lstrip('# ').strip()
        assert title in page and 'Published weights' in page, method
        assert '@inproceedings' in page or '@article' in page, method
    api = (html / 'api.html').read_text()
    for name in ('GSNet', 'FineGrasp', 'GraspInferencer', 'GraspNetMetric', 'gather_grids',
                 'SampleGraspLabels', 'LabelStore'):
        assert f'>{name}<' in api, name
    formats = re.sub(r'<[^>]+>', '', (html / 'advanced_guides' / 'storage_formats.html')
                     .read_text())  # the literal blocks are highlighted token by token
    assert 'score_codes.npy' in formats and 'point_offsets.npy' in formats
