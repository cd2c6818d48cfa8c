"""tools/misc/model_zoo.py: the model zoo's table is the metafiles' figures, and the metafiles'
published figures are the ones the method pages quote.

The page is compared with a table regenerated in memory; a mutated copy of the metafiles shows
that a changed figure, a dropped result or a dropped published row changes the table."""
import copy
import os
import shutil

import pytest
import yaml

from _scripts import script_module

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))
model_zoo = script_module('tools/misc/model_zoo.py')


def read(path: str) -> str:
    with open(os.path.join(REPO, path), encoding='utf-8') as f:
        return f.read()


def test_the_model_zoo_page_agrees_with_the_metafiles():
    page = read(model_zoo.PAGE)
    assert model_zoo.updated(page, model_zoo.render()) == page, \
        'docs/model_zoo.md disagrees with the metafiles: run python tools/misc/model_zoo.py'
    names = [c['Name'] for c, _ in model_zoo.methods()]
    assert len(names) == 6 and all(f'[{n}](model_zoo/' in page for n in names), names


def test_published_figures_and_converters_are_the_method_pages():
    for collection, _ in model_zoo.methods():
        page = read(collection['README'])
        method = os.path.basename(os.path.dirname(collection['README']))
        assert collection['Converter'] == \
            f'tools/model_converters/reference_to_mmgrasp.py {method}', method
        assert f'reference_to_mmgrasp.py {method} ' in page, method
        assert collection['Published Weights'], method
        for entry in collection['Published']:
            assert set(entry) == {'Source', 'Camera', 'Collision Detection', 'AP'}, entry
            assert entry['Camera'] in model_zoo.CAMERAS, entry
            rows = [line for line in page.splitlines() if line.startswith('|')
                    and model_zoo.CAMERAS[entry['Camera']] in line]
            figures = [f"{entry['AP'][split]:.2f}" for split in ('seen', 'similar', 'novel')]
            assert any(all(f in row for f in figures) for row in rows), (method, entry)


@pytest.fixture(scope='module')
def metafile_copy(tmp_path_factory):
    """model-index.yml and the metafiles, copied to mutate."""
    root = tmp_path_factory.mktemp('zoo')
    for path in ['model-index.yml'] + yaml.safe_load(read('model-index.yml'))['Import']:
        os.makedirs(root / os.path.dirname(path), exist_ok=True)
        shutil.copy(os.path.join(REPO, path), root / path)
    return root


def test_the_table_follows_a_changed_metafile(metafile_copy):
    path = metafile_copy / 'configs' / 'gsnet' / 'metafile.yml'
    original = yaml.safe_load(path.read_text())
    table = model_zoo.render(str(metafile_copy))
    assert table == model_zoo.render()

    def rendered(change) -> str:
        meta = copy.deepcopy(original)
        change(meta)
        path.write_text(yaml.safe_dump(meta, sort_keys=False))
        try:
            return model_zoo.render(str(metafile_copy))
        finally:
            path.write_text(yaml.safe_dump(original, sort_keys=False))

    demo = next(i for i, m in enumerate(original['Models']) if m['Name'] == 'gsnet_demo')
    moved = rendered(lambda m: m['Models'][demo]['Results'][0]['Metrics'].update(AP=10.65))
    assert '10.65 (`gsnet_demo.py`' in moved and '10.64' not in moved
    unmeasured = rendered(lambda m: m['Models'][demo].pop('Results'))
    assert 'not measured (`gsnet_demo.py`' in unmeasured
    kinect = rendered(lambda m: m['Collections'][0]['Published'].pop())
    assert '61.83' in table and '61.83' not in kinect
    page = read(model_zoo.PAGE)
    assert model_zoo.updated(page, moved) != page
    with pytest.raises(ValueError, match='model_zoo.md'):
        model_zoo.updated(page.replace(model_zoo.END, ''), table)


def test_the_front_pages_name_every_method():
    """README.md's and docs/index.md's opening paragraphs name every method of the index."""
    names = [c['Name'] for c, _ in model_zoo.methods()]
    for page in ('README.md', os.path.join('docs', 'index.md')):
        opening = ' '.join(read(page).split('\n\n')[1].split())
        assert [n for n in names if n not in opening] == [], (page, opening)
