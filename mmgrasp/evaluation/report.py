"""The results table tools/test.py and eval_dump.py print (markdown)."""
from typing import Dict, Mapping

SPLIT_ORDER = ('seen', 'similar', 'novel')


def results_table(figures: Mapping[str, float], settings: Mapping[str, object]) -> str:
    """AP / AP0.8 / AP0.4 per split present (and over all frames), then the settings."""
    rows = ['| split | frames | AP | AP0.8 | AP0.4 |', '|---|---:|---:|---:|---:|']
    for split in SPLIT_ORDER:
        if f'{split}/AP' in figures:
            rows.append(_row(split, figures, f'{split}/'))
    if 'AP' in figures:
        rows.append(_row('all', figures, ''))
    lines = [*rows, '', '| setting | value |', '|---|---|']
    lines += [f'| {k} | {v} |' for k, v in settings.items()]
    return '\n'.join(lines)


def _row(name: str, figures: Dict[str, float], prefix: str) -> str:
    return (f'| {name} | {int(figures[prefix + "frames"])} | {figures[prefix + "AP"]:.2f} | '
            f'{figures[prefix + "AP0.8"]:.2f} | {figures[prefix + "AP0.4"]:.2f} |')
