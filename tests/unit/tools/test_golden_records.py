"""The goldens' records say what was run: the graspclutter6dAPI version its setup script
installs (the distribution's, not the module's stale ``__version__``), and for the scale-AP
golden that SBG's protocol was re-typed over graspnetAPI, SBG's script itself not run."""
import ast
import json
import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(
    __file__)))))
GOLDEN = os.path.join(ROOT, 'tools', 'analysis', 'golden')


def _read(*parts):
    with open(os.path.join(ROOT, *parts)) as f:
        return f.read()


def _protocol_literal(source: str) -> str:
    """The value of the ``'protocol'`` key of the dict literal the generator writes."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values):
                if isinstance(key, ast.Constant) and key.value == 'protocol':
                    return ast.literal_eval(value)
    raise AssertionError('no protocol entry')


def test_gc6d_golden_records_the_installed_distribution_version():
    pinned = re.search(r'graspclutter6dapi==([\d.]+)',
                       _read('tools', 'analysis', 'golden', 'setup_graspclutter6dapi_env.sh'))
    golden = json.loads(_read('tests', 'data', 'gc6d_golden', 'golden.json'))
    assert golden['graspclutter6dAPI'] == pinned.group(1)
    source = _read('tools', 'analysis', 'golden', 'make_gc6d_eval_golden.py')
    assert "importlib.metadata.version('graspclutter6dAPI')" in source
    assert '__version__' not in re.sub(r'#.*', '', source.split("'graspclutter6dAPI':")[1]
                                       .split('\n')[0])


def test_scale_golden_says_sbg_script_was_not_run():
    golden = json.loads(_read('tests', 'data', 'eval_golden_scale', 'golden_scale.json'))
    generated = _protocol_literal(_read('tools', 'analysis', 'golden', 'make_scale_golden.py'))
    assert golden['protocol'] == generated
    assert "SBG's script itself was not run" in generated and '@5904d5f' in generated
    guide = ' '.join(_read('docs', 'user_guides', 'evaluation.md').split())
    assert "re-types SBG's `eval_grasp`" in guide and "SBG's script itself was not run" in guide
    assert 'SBG\'s script was not run' in ' '.join(
        _read('tests', 'data', 'eval_golden_scale', 'README.md').split())
