"""Sphinx configuration of mmgrasp's documentation (Markdown pages through MyST).

Build (what tests/integration/test_docs_build.py runs, warnings as errors):

    sphinx-build -W --keep-going -b html docs docs/_build/html

The model zoo pages are the methods' own ``configs/<method>/README.md``: before reading, one
small page per method of ``model-index.yml`` is written into ``docs/model_zoo/`` (git-ignored)
that includes its README, so a method is added by its README, metafile and one line of
``model-index.yml``.
"""
import os
import sys

import yaml

DOCS = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(DOCS)
sys.path.insert(0, REPO)

from mmgrasp.version import __version__  # noqa: E402

project = 'mmgrasp'
copyright = 'mmgrasp authors'
version = release = __version__

extensions = ['myst_parser', 'sphinx.ext.autodoc', 'sphinx.ext.napoleon']
source_suffix = {'.md': 'markdown'}
root_doc = 'index'
exclude_patterns = ['_build']
myst_heading_anchors = 3
myst_enable_extensions = ['colon_fence']

autodoc_member_order = 'bysource'
autodoc_typehints = 'description'
napoleon_google_docstring = True
napoleon_numpy_docstring = False

html_theme = 'furo'
html_title = f'mmgrasp {release}'
html_static_path = []


def method_pages(model_index: str = os.path.join(REPO, 'model-index.yml'),
                 out_dir: str = os.path.join(DOCS, 'model_zoo')) -> list:
    """Write ``model_zoo/<method>.md`` (an include of the method's README) for every metafile of
    the model index; return the page names. Pages of methods no longer listed are removed."""
    with open(model_index) as f:
        metafiles = yaml.safe_load(f)['Import']
    os.makedirs(out_dir, exist_ok=True)
    pages = []
    for metafile in metafiles:
        with open(os.path.join(REPO, metafile)) as f:
            (collection, ) = yaml.safe_load(f)['Collections']
        readme = collection['README']
        name = os.path.basename(os.path.dirname(readme))
        text = (f'```{{include}} ../../{readme}\n'
                ':relative-docs: ../\n:relative-images:\n```\n')
        path = os.path.join(out_dir, f'{name}.md')
        if not os.path.exists(path) or open(path).read() != text:
            with open(path, 'w') as f:
                f.write(text)
        pages.append(name)
    for stale in set(os.listdir(out_dir)) - {f'{p}.md' for p in pages}:
        os.remove(os.path.join(out_dir, stale))
    return pages


method_pages()
