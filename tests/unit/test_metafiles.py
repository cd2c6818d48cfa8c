"""model-index.yml and the methods' metafiles against the configs they list.

Each metafile (OpenMMLab's model-index format, what ``mim search`` reads) has one collection
with its paper, page and code, and one model per config of its method: every listed config
exists, every ``configs/<method>_*.py`` is listed, every config belongs to a method, each
model has the fields the model zoo and mim show, and a result is a figure measured here,
with its machine and date, that the method's page quotes.
"""
import copy
import glob
import os
import re
from typing import Dict, List

import yaml

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODEL_FIELDS = ('Training Data', 'Camera', 'Label Grids', 'Batch Size', 'Epochs')
MEASURED_FIELDS = ('Training Resources', 'Measured')


def load(path: str) -> dict:
    with open(os.path.join(REPO, path)) as f:
        return yaml.safe_load(f)


def metafile_paths() -> List[str]:
    return load('model-index.yml')['Import']


def method_configs(method: str) -> List[str]:
    """``configs/<method>_*.py``, as repository paths."""
    return sorted(os.path.relpath(p, REPO)
                  for p in glob.glob(os.path.join(REPO, 'configs', f'{method}_*.py')))


def metafile_problems(meta: dict, method: str) -> List[str]:
    """What is wrong with the metafile of ``configs/<method>/``."""
    found = []
    collections = meta.get('Collections') or []
    if len(collections) != 1:
        return [f'{method}: one collection expected, got {len(collections)}']
    collection = collections[0]
    name = collection.get('Name')
    for key in ('Name', 'Metadata', 'Paper', 'README', 'Code'):
        if not collection.get(key):
            found.append(f'{method}: collection without {key}')
    if collection.get('README') != f'configs/{method}/README.md':
        found.append(f'{method}: README is {collection.get("README")!r}')
    paper = collection.get('Paper') or {}
    if not (str(paper.get('URL', '')).startswith('https://') and paper.get('Title')):
        found.append(f'{method}: paper needs a URL and a title')
    code = (collection.get('Code') or {}).get('URL', '')
    if not os.path.isfile(os.path.join(REPO, code)):
        found.append(f'{method}: code {code!r} does not exist')
    models = meta.get('Models') or []
    listed = [m.get('Config') for m in models]
    for config in sorted(set(listed) - set(method_configs(method))):
        found.append(f'{method}: lists {config!r}, which is not a config of the method')
    for config in sorted(set(method_configs(method)) - set(listed)):
        found.append(f'{method}: does not list {config}')
    if len(set(listed)) != len(listed):
        found.append(f'{method}: a config is listed twice')
    for model in models:
        config = model.get('Config') or ''
        if model.get('Name') != os.path.splitext(os.path.basename(config))[0]:
            found.append(f'{method}: model {model.get("Name")!r} is not named after {config}')
        if model.get('In Collection') != name:
            found.append(f'{method}: {model.get("Name")} is not in collection {name!r}')
        metadata = model.get('Metadata') or {}
        found += [f'{method}: {model.get("Name")} has no {key}' for key in MODEL_FIELDS
                  if key not in metadata]
        for result in model.get('Results') or []:
            metrics = result.get('Metrics') or {}
            if not (result.get('Task') and result.get('Dataset') and 'AP' in metrics):
                found.append(f'{method}: {model.get("Name")} has a result without task, '
                             f'dataset or AP')
            found += [f'{method}: {model.get("Name")} has a result without {key}'
                      for key in MEASURED_FIELDS if key not in metadata]
    return found


def test_every_metafile_matches_its_configs():
    found: Dict[str, List[str]] = {}
    for path in metafile_paths():
        method = os.path.basename(os.path.dirname(path))
        assert path == f'configs/{method}/metafile.yml', path
        found[method] = metafile_problems(load(path), method)
    assert not any(found.values()), found


def test_every_config_belongs_to_a_method():
    methods = [os.path.basename(os.path.dirname(p)) for p in metafile_paths()]
    configs = {os.path.relpath(p, REPO) for p in glob.glob(os.path.join(REPO, 'configs', '*.py'))}
    listed = {c for m in methods for c in method_configs(m)}
    assert configs == listed, f'configs of no method in model-index.yml: {configs - listed}'


def test_measured_results_are_quoted_on_the_method_page():
    for path in metafile_paths():
        meta = load(path)
        with open(os.path.join(REPO, meta['Collections'][0]['README']), encoding='utf-8') as f:
            page = f.read()
        for model in meta['Models']:
            assert f'`{os.path.basename(model["Config"])}`' in page, model['Config']
            for result in model.get('Results') or []:
                for metric, value in result['Metrics'].items():
                    assert f'{value:.2f}' in page, (model['Name'], metric, value)


def test_the_readme_links_every_method_page():
    with open(os.path.join(REPO, 'README.md'), encoding='utf-8') as f:
        readme = f.read()
    for path in metafile_paths():
        (collection, ) = load(path)['Collections']
        assert re.search(r'\[%s\]\(%s\)' % (re.escape(collection['Name']),
                                            re.escape(collection['README'])), readme), \
            f'README.md has no link [{collection["Name"]}]({collection["README"]})'


def test_the_check_catches_a_wrong_metafile():
    meta = load('configs/gsnet/metafile.yml')
    assert not metafile_problems(meta, 'gsnet')

    def broken(change) -> List[str]:
        mutant = copy.deepcopy(meta)
        change(mutant)
        return metafile_problems(mutant, 'gsnet')

    assert broken(lambda m: m['Models'].pop())  # a config not listed
    assert broken(lambda m: m['Models'][0].update(Config='configs/gsnet_missing.py'))
    assert broken(lambda m: m['Models'][0]['Metadata'].pop('Camera'))
    assert broken(lambda m: m['Models'][0].update(Name='gsnet'))
    assert broken(lambda m: m['Models'][0].update({'In Collection': 'GSNet2'}))
    assert broken(lambda m: m['Collections'][0].update(Code={'URL': 'mmgrasp/models/x.py'}))
    demo = next(x for x in meta['Models'] if x.get('Results'))
    assert broken(lambda m: next(x for x in m['Models'] if x['Name'] == demo['Name'])
                  ['Metadata'].pop('Measured'))
