"""The README claims only what was run: CUDA results stay out until tools/analysis/
device_check.sh has run on a GPU, and the README says which parts are verified where."""
import os
import re

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def paragraphs(path: str):
    with open(path, encoding='utf-8') as f:
        return [' '.join(p.split()) for p in re.split(r'\n\s*\n', f.read())]


def test_no_cuda_result_is_claimed_before_the_device_check_ran():
    readme = paragraphs(os.path.join(REPO, 'README.md'))
    result_words = re.compile(r'bit-identical|bit for bit|identical|agree|faster|speed-?up', re.I)
    # whole sentences: a ';', ':' or dash must not part a result from the CUDA it is about
    sentences = [s for p in readme for s in re.split(r'(?<=\.)\s+', p)]
    claims = [s for s in sentences if 'CUDA' in s and result_words.search(s)
              and 'not yet run on a GPU' not in s]
    assert not claims, f'CUDA results claimed before device_check.sh ran on a GPU: {claims}'
    status = [p for p in readme if p.startswith('**What is verified where.**')]
    assert len(status) == 1, 'the README says which parts are verified where'
    assert 'CPU' in status[0] and 'not yet run on a GPU' in status[0]
    assert 'tools/analysis/device_check.sh' in status[0]


def test_the_demo_ap_in_the_readme_is_the_recorded_runs():
    """The README's GSNet demo figures are the runs recorded in docs/benchmarks.md: at least
    three runs of the README's own 6-epoch command, their spread, and the longer run and label
    ceiling quoted beside them."""
    with open(os.path.join(REPO, 'docs', 'benchmarks.md'), encoding='utf-8') as f:
        docs = f.read()
    section = docs[docs.index('## GSNet demo: spread, longer runs, label ceiling'):]
    section = section[:section.index('\n## ', 1) if '\n## ' in section[1:] else len(section)]
    rows = [r.split('|')[1:-1] for r in section.splitlines() if re.match(r'\| \d ', r)]
    six = [float(r[2].split()[0]) for r in rows if r[1].strip() == '6']
    assert len(six) >= 3, rows
    readme = ' '.join(paragraphs(os.path.join(REPO, 'README.md')))
    (main_job,) = re.findall(r'the job ends with the AP table, AP (\d+\.\d\d) after its 6 epochs',
                             readme)
    spread = max(six) - min(six)
    if spread == 0:
        assert float(main_job) == six[0] and 'to the digit' in readme
    else:  # a spread is stated as a range
        assert f'{min(six):.2f}' in readme and f'{max(six):.2f}' in readme
    assert f'this run scored AP {main_job}' in readme  # the picture's caption
    longer = {r[1].strip(): float(r[2].split()[0]) for r in rows}
    assert f'reach {longer["18"]:.2f}' in readme and 'grasps 100.00' in readme
    assert '100.00' in section  # the label ceiling, measured
