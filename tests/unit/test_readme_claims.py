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
