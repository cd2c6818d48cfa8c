"""The README and the documentation claim only what was run: CUDA results stay out until
tools/analysis/device_check.sh has run on a GPU, the README says which parts are verified where,
and the demo figures of the Quick start are the runs recorded in the benchmark notes."""
import glob
import os
import re

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def paragraphs(path: str):
    with open(path, encoding='utf-8') as f:
        return [' '.join(p.split()) for p in re.split(r'\n\s*\n', f.read())]


#: The user-facing pages: the README, the guides and the method pages. The benchmark notes
#: (counts of the CUDA path made on the CPU, compile checks) are measurements, not claims.
USER_PAGES = ['README.md', 'docs/get_started.md', *sorted(
    os.path.relpath(p, REPO) for p in glob.glob(os.path.join(REPO, 'docs', '*_guides', '*.md'))
    + glob.glob(os.path.join(REPO, 'configs', '*', 'README.md')))]


def cuda_claims(path: str):
    """Sentences that state a result (identical, faster, ...) about CUDA without saying it has
    not run on a GPU."""
    result_words = re.compile(r'bit-identical|bit for bit|identical|agree|faster|speed-?up', re.I)
    # whole sentences: a ';', ':' or dash must not part a result from the CUDA it is about
    sentences = [s for p in paragraphs(path) for s in re.split(r'(?<=\.)\s+', p)]
    return [s for s in sentences if 'CUDA' in s and result_words.search(s)
            and 'not yet run on a GPU' not in s]


def test_no_cuda_result_is_claimed_before_the_device_check_ran():
    claims = {page: cuda_claims(os.path.join(REPO, page)) for page in USER_PAGES}
    assert not {p: c for p, c in claims.items() if c}, \
        f'CUDA results claimed before device_check.sh ran on a GPU: {claims}'
    readme = paragraphs(os.path.join(REPO, 'README.md'))
    status = [p for p in readme if p.startswith('**What is verified where.**')]
    assert len(status) == 1, 'the README says which parts are verified where'
    assert 'CPU' in status[0] and 'not yet run on a GPU' in status[0]
    assert 'tools/analysis/device_check.sh' in status[0]


def test_cuda_claims_check_catches_a_claim(tmp_path):
    page = tmp_path / 'page.md'
    page.write_text('The CUDA path gives bit-identical targets.\n')
    assert cuda_claims(str(page))
    page.write_text('The CUDA path gives bit-identical targets, but has not yet run on a GPU.\n')
    assert not cuda_claims(str(page))


def test_the_demo_ap_in_the_quick_start_is_the_recorded_runs():
    """The GSNet demo figures of the Quick start (docs/get_started.md) are the runs recorded in
    the benchmark notes: the shipped demo's thread count (1) run at least twice and on two
    CPUs, all to the digit, and the longer run and label ceiling quoted beside them."""
    with open(os.path.join(REPO, 'docs', 'notes', 'benchmarks', 'demos.md'),
              encoding='utf-8') as f:
        docs = f.read()

    def section_of(title):
        part = docs[docs.index(title):]
        return part[:part.index('\n## ', 1) if '\n## ' in part[1:] else len(part)]

    threads = [r.split('|')[1:-1] for r in section_of('## GSNet demo: thread count').splitlines()
               if re.match(r'\| *\d+ \|', r)]
    one = [float(r[4].split()[0]) for r in threads if r[0].strip() == '1']
    assert len(one) >= 3 and len(set(one)) == 1, threads
    readme = ' '.join(paragraphs(os.path.join(REPO, 'docs', 'get_started.md')))
    (main_job,) = re.findall(r'the job ends with the AP table, AP (\d+\.\d\d) after its 6 epochs',
                             readme)
    assert float(main_job) == one[0] and 'to the digit' in readme
    assert f'this run scored AP {main_job}' in readme  # the picture's caption
    section = section_of('## GSNet demo: spread, longer runs, label ceiling')
    rows = [r.split('|')[1:-1] for r in section.splitlines() if re.match(r'\| \d ', r)]
    longer = {r[1].strip(): float(r[2].split()[0]) for r in rows}
    assert f'reached {longer["18"]:.2f}' in readme and 'grasps score 100.00' in readme
    assert '100.00' in section  # the label ceiling, measured


def test_get_started_gives_the_readme_quick_start_verbatim():
    """The two Quick start commands appear on the Get started page exactly as in the README
    (where test_ci_run and test_readme_demo check them)."""
    def bash_blocks(*parts):
        with open(os.path.join(REPO, *parts), encoding='utf-8') as f:
            return re.findall(r'```bash\n(.*?)\n```', f.read(), re.S)
    quick_start = bash_blocks('README.md')[:2]
    assert len(quick_start) == 2 and all('pip install torch==2.13.0' in c for c in quick_start)
    guide = bash_blocks('docs', 'get_started.md')
    assert all(command in guide for command in quick_start), (quick_start, guide)
