"""The documentation speaks of the project alone: no development history, no machine paths.

Checked files, every line, code blocks included (a command is copied as it is written):

- all rules: ``README.md``, ``configs/*/README.md``, ``docs/**/*.md`` (what the site and GitHub
  render) and the developers' notes ``tests/**/*.md`` and ``tools/**/*.md`` (how each golden was
  made);
- machine paths only: the scripts and their usage texts, ``tools/**/*.py``, ``tools/**/*.sh``,
  and the non-test modules of ``tests/`` (``conftest.py``, ``_*_helpers.py``, the golden makers
  under ``tests/data/``); ``test_*.py`` files are left out: they hold planted examples (this one's).
  In code "session" and "helper" are pytest's and Python's words, not history.

Rules (a hit names ``file:line`` and the offending words):

- **Own issue numbers.** ``issue 42``, ``issues #42``, ``PR 7``, ``pull request 7`` and a bare
  ``#42`` are flagged. An upstream issue of *another* repository stays when the word right
  before the number (or before ``issue``/``PR``) is the repository's name, written as
  ``owner/name`` or as an identifier that no plain word is: with an inner capital, a digit,
  ``-``, ``_`` or ``.`` (``graspnetAPI #42``, ``MinkowskiEngine issue 12``,
  ``graspnet/graspnetAPI #42``); a link to ``github.com/<owner>/<name>/issues/<n>`` names its
  repository and is not matched.
- **Who ran it, when.** The words ``session(s)`` and ``helper(s)`` as standalone words, and
  ``sitting`` as a noun (after a determiner: ``this sitting``, ``one sitting``; ``sittings``).
  Identifiers are not words: ``session_token``, ``_hggd_helpers.py``, ``requests.Session`` and
  ``--session`` pass, as do hyphenated compounds (``session-scoped`` pytest fixtures),
  ``session token`` (S3) and
  ``helper function/method/class/module/script`` (code, not a person).
- **Absolute machine paths.** A path that starts at ``/work/``, ``/tmp/``, ``/root/``,
  ``/home/``, ``/Users/``, ``/mnt/`` or ``/scratch/`` (not inside a URL or a longer path; a
  shell default ``${1:-/work/...}`` counts). Command examples use relative paths (``data/...``,
  ``work_dirs/...``) or placeholders (``CHECKOUT``, ``GRASPNETAPI_VENV``, ``WORK``,
  ``$MMGRASP_CACHE``); a script takes such a folder as a required argument or makes one with
  ``mktemp``/``tempfile``; system tools (``/usr/bin/time``, ``/dev/shm``) pass.
"""
import glob
import os
import re
from typing import List, Tuple

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

_REPO_NAME = r'(?:[\w.-]+/[\w.-]+|[A-Za-z]\w*[a-z][A-Z]\w*|[A-Za-z][\w.-]*[\d_.-][\w.-]*)'
_NUMBER_REF = re.compile(
    r'(?P<before>\S+\s+)?(?P<ref>\b(?:issues?|PRs?|pull requests?)\s*#?\d+|(?<![\w&/#])#\d+\b)',
    re.IGNORECASE)
_MAY_REFER = re.compile(r'#\d|issue|\bPRs?\b|pull request', re.IGNORECASE)  # a cheap first pass
_WORDS = re.compile(
    r'(?<![\w./-])(?:'
    r'sessions?(?![\w/-]|\.\w|[ _]tokens?)'
    r'|helpers?(?![\w/-]|\.\w| (?:functions?|methods?|class(?:es)?|modules?|scripts?)\b)'
    r'|sittings'
    r')(?![\w/])'
    r'|\b(?:this|that|the|one|a|an|each|every|same|next|previous|earlier|later|another|single)'
    r'\s+sitting\b', re.IGNORECASE)
_PATH = re.compile(
    r'(?:(?<![\w.~$/:-])|(?<=:-))/(?:work|tmp|root|home|Users|mnt|scratch)/[^\s`\'")}]*')


def _upstream(before: str, ref: str) -> bool:
    """Whether ``ref`` is another repository's issue: the word before it names the repository."""
    word = (before or '').strip().strip('(["\'`*,;:.!?')
    return bool(word) and re.fullmatch(_REPO_NAME, word) is not None


def problems(text: str) -> List[Tuple[int, str]]:
    """``(line number, offending text)`` for every hit of the rules in ``text``."""
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        for hit in _NUMBER_REF.finditer(line) if _MAY_REFER.search(line) else ():
            if not _upstream(hit.group('before'), hit.group('ref')):
                found.append((number, hit.group('ref')))
        found += [(number, hit.group(0)) for hit in _WORDS.finditer(line)]
    return sorted(found + machine_paths(text))


def machine_paths(text: str) -> List[Tuple[int, str]]:
    """``(line number, path)`` for every absolute machine path in ``text``."""
    return [(number, hit.group(0)) for number, line in enumerate(text.splitlines(), 1)
            for hit in _PATH.finditer(line)]


def _glob(*patterns: str) -> List[str]:
    return [p for pattern in patterns for p in glob.glob(pattern, root_dir=REPO, recursive=True)]


def documentation_files() -> List[str]:
    paths = ['README.md'] + _glob('configs/*/README.md', 'docs/**/*.md', 'tests/**/*.md',
                                  'tools/**/*.md')
    return sorted(p for p in paths if not p.startswith(('docs/_build/', 'docs/model_zoo/')))


def script_files() -> List[str]:
    paths = _glob('tools/**/*.py', 'tools/**/*.sh', 'tests/**/*.py')
    return sorted(p for p in paths if not os.path.basename(p).startswith('test_'))


def _hits(paths: List[str], check) -> List[str]:
    hits = []
    for path in paths:
        with open(os.path.join(REPO, path), encoding='utf-8') as f:
            hits += [f'{path}:{line}: {word!r}' for line, word in check(f.read())]
    return hits


def test_the_documentation_speaks_of_the_project_alone():
    hits = _hits(documentation_files(), problems)
    assert not hits, (f'{len(hits)} development-history words or machine paths in the docs '
                      '(rules: tests/integration/test_docs_hygiene.py):\n' + '\n'.join(hits))


def test_the_scripts_name_no_machine_path():
    assert {'tools/analysis/golden/regenerate.sh', 'tools/data/make_synthetic.py',
            'tests/data/normals_golden/make_golden.py', 'tests/conftest.py'} <= set(script_files())
    hits = _hits(script_files(), machine_paths)
    assert not hits, (f'{len(hits)} machine paths in scripts or their usage texts (use a '
                      'placeholder, a relative path or tempfile):\n' + '\n'.join(hits))


def test_the_checker_flags_planted_sentences():
    bad = [
        'Measured in issue 42 on the loaded machine.',
        'See #42 for the discussion.',
        "an AVX-512 EPYC (issue 42's fresh clone)",
        'Fixed by PR #7.',
        'the training did not fit the session on the loaded machine',
        'Two sessions ran alongside.',
        'It did not fit the session. Issue 7 has the rest.',
        'shared with three other helpers\' trainings',
        'than a helper may take',
        'measured in this sitting',
        'python tools/train.py --cfg-options data_root=/tmp/syn_real',
        '--graspnetapi-python /work/gnapi-venv/bin/python',
        'cd /home/user/mmgrasp && ls /root/.cache',
        'venv=${1:-/work/gnapi-venv}',
        'tools/analysis/golden/regenerate.sh /work/gnapi-venv /tmp/golden_work',
    ]
    for sentence in bad:
        assert problems(sentence), sentence
    good = [
        'graspnetAPI #42 reports the same off-by-one.',
        'MinkowskiEngine issue 12 explains the kernel order.',
        'graspnet/graspnetAPI #42 and https://github.com/open-mmlab/mim/issues/12',
        'Per-object helper methods read one object: `labels.gather_scores(rows)`.',
        'a secret key (`secret_access_key`, `session_token`) and the session token',
        'reuse the session-scoped fixtures of `tests/conftest.py`',
        '`tests/unit/storage/_hggd_helpers.py` follows the rules',
        'objects sitting on the table; the 42 frames of scene 7',
        '/usr/bin/time -v python tools/test.py; MMGRASP_CACHE=$MMGRASP_CACHE data/syn_real',
        'see [the section](page.md#section-2) and heading anchors',
        'git clone https://github.com/graspnet/graspnet-baseline CHECKOUT',
        'work=$(mktemp -d "${TMPDIR:-/tmp}/mmgrasp.XXXXXX"); venv=${1:?usage: x.sh VENV}',
        'tools/analysis/golden/regenerate.sh GRASPNETAPI_VENV WORK; "$work/synthetic"',
    ]
    for sentence in good:
        assert not problems(sentence), (sentence, problems(sentence))
