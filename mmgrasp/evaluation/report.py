"""The results tables tools/test.py and eval_dump.py print (markdown)."""
from typing import Dict, Mapping, Optional

SPLIT_ORDER = ('seen', 'similar', 'novel')
SIZES = ('small', 'medium', 'large')


def results_table(figures: Mapping[str, float], settings: Mapping[str, object],
                  coverage: Optional[Mapping[str, object]] = None) -> str:
    """AP / AP0.8 / AP0.4 per split present (and over all frames); the AP by grasp width when
    ``figures`` hold it (``small/AP`` ...); then the settings. An incomplete or sampled
    evaluation (``coverage``, see :mod:`.coverage`) is labelled above the table and in it, and
    so are frames with an empty dump (``empty_frames``, see :mod:`.empty_frames`)."""
    lines = []
    if coverage and not coverage['complete']:
        lines += [f'**{coverage["label"]}** ({coverage["details"]})', '']
    empty = _empty_frames(figures)
    if empty:
        lines += [f'**{empty} frames have no grasp in the dump, each scoring AP 0** (the '
                  'warning above names them and the likely cause)', '']
    lines += _table(figures, '')
    if any(f'{size}/AP' in figures for size in SIZES):
        lines += ['', "AP by grasp width (Scale-Balanced-Grasp's evaluate_scale.py: small < 0.04 m,"
                  ' medium 0.04-0.07 m, large >= 0.07 m; 5 grasps per object, precision@1..20)',
                  '', '| width | split | frames | AP | AP0.8 | AP0.4 |',
                  '|---|---|---:|---:|---:|---:|']
        for size in SIZES:
            lines += _table(figures, f'{size}/')[2:]
    lines += ['', '| setting | value |', '|---|---|']
    if coverage and not coverage['complete']:
        lines.append(f'| frames | {coverage["label"]} |')
    if empty:
        lines.append(f'| frames without grasps | {empty} |')
    lines += [f'| {k} | {v} |' for k, v in settings.items()]
    return '\n'.join(lines)


def _empty_frames(figures: Mapping[str, float]) -> str:
    """'3 of 12': frames with an empty dump of those evaluated ('' when none or not counted)."""
    count = int(figures.get('empty_frames', 0))
    return f'{count} of {int(figures["frames"])}' if count else ''


def _table(figures: Mapping[str, float], size: str) -> list:
    rows = ['| split | frames | AP | AP0.8 | AP0.4 |', '|---|---:|---:|---:|---:|']
    for split in SPLIT_ORDER:
        if f'{size}{split}/AP' in figures:
            rows.append(_row(split, figures, f'{size}{split}/', size))
    if f'{size}AP' in figures:
        rows.append(_row('all', figures, size, size))
    return rows


def _row(name: str, figures: Dict[str, float], prefix: str, size: str) -> str:
    lead = f'| {size[:-1]} ' if size else ''
    return (f'{lead}| {name} | {int(figures[prefix + "frames"])} | {figures[prefix + "AP"]:.2f} | '
            f'{figures[prefix + "AP0.8"]:.2f} | {figures[prefix + "AP0.4"]:.2f} |')
