"""The exact orders graspnetAPI's sorts leave tied scores in.

Grasp scores tie often (labels are on a 0.1 grid). graspnetAPI's results depend on the order of
ties in three places: ``grasp_nms`` (C++ ``std::sort``, libstdc++'s introsort, best first), and
two ``np.argsort`` calls (numpy 1.23's introsort; numpy 2 on x86 may use SIMD sorts with other
tie orders). Both algorithms are deterministic, so they are re-run here; without ties any sort
gives the same order and numpy's is used.
"""
from __future__ import annotations

import numpy as np


def _stable_if_distinct(values: np.ndarray):
    """``np.argsort(values, kind='stable')`` when no two values are equal (as ``np.unique``
    counts them: -0.0 equals 0.0, NaNs equal each other), else None: any sort then agrees."""
    order = np.argsort(values, kind='stable')
    ordered = values[order]
    if (ordered[1:] == ordered[:-1]).any() or np.count_nonzero(ordered != ordered) > 1:
        return None
    return order


def _less(a: float, b: float) -> bool:
    return a < b or (b != b and a == a)  # numpy's float order: NaN last


def legacy_numpy_argsort(values: np.ndarray) -> np.ndarray:
    """``np.argsort(values)`` as numpy 1.23 computes it (``aquicksort_``)."""
    v = np.asarray(values, dtype=np.float64).reshape(-1)
    n = len(v)
    order = _stable_if_distinct(v)
    if order is not None:
        return order
    v = v.tolist()
    a = list(range(n))
    if n < 2:
        return np.array(a, dtype=np.int64)
    stack = []
    pl, pr = 0, n - 1
    cdepth = (n.bit_length() - 1) * 2
    while True:
        if cdepth < 0:
            _legacy_heapsort(v, a, pl, pr - pl + 1)
        else:
            while pr - pl > 15:
                pm = pl + ((pr - pl) >> 1)
                if _less(v[a[pm]], v[a[pl]]):
                    a[pm], a[pl] = a[pl], a[pm]
                if _less(v[a[pr]], v[a[pm]]):
                    a[pr], a[pm] = a[pm], a[pr]
                if _less(v[a[pm]], v[a[pl]]):
                    a[pm], a[pl] = a[pl], a[pm]
                vp = v[a[pm]]
                pi, pj = pl, pr - 1
                a[pm], a[pj] = a[pj], a[pm]
                while True:
                    pi += 1
                    while _less(v[a[pi]], vp):
                        pi += 1
                    pj -= 1
                    while _less(vp, v[a[pj]]):
                        pj -= 1
                    if pi >= pj:
                        break
                    a[pi], a[pj] = a[pj], a[pi]
                pk = pr - 1
                a[pi], a[pk] = a[pk], a[pi]
                cdepth -= 1
                if pi - pl < pr - pi:
                    stack.append((pi + 1, pr, cdepth))
                    pr = pi - 1
                else:
                    stack.append((pl, pi - 1, cdepth))
                    pl = pi + 1
            for pi in range(pl + 1, pr + 1):
                vi = a[pi]
                vp = v[vi]
                pj = pi
                while pj > pl and _less(vp, v[a[pj - 1]]):
                    a[pj] = a[pj - 1]
                    pj -= 1
                a[pj] = vi
        if not stack:
            break
        pl, pr, cdepth = stack.pop()
    return np.array(a, dtype=np.int64)


def _legacy_heapsort(v, a, start, n):
    def at(i):  # 1-based into a[start:start + n]
        return start + i - 1
    def sift_down(tmp, i, n):  # place tmp at heap slot i of a heap of n (numpy's loop)
        j = i << 1
        while j <= n:
            if j < n and _less(v[a[at(j)]], v[a[at(j + 1)]]):
                j += 1
            if _less(v[tmp], v[a[at(j)]]):
                a[at(i)] = a[at(j)]
                i, j = j, j + j
            else:
                break
        a[at(i)] = tmp
    for l_ in range(n >> 1, 0, -1):
        sift_down(a[at(l_)], l_, n)
    while n > 1:
        tmp = a[at(n)]
        a[at(n)] = a[at(1)]
        n -= 1
        sift_down(tmp, 1, n)


def std_sort_descending(scores: np.ndarray) -> np.ndarray:
    """Indices in the order libstdc++'s ``std::sort`` leaves them with ``a.score > b.score``
    (grasp_nms's ``reverse_argsort``)."""
    s = np.asarray(scores, dtype=np.float64).reshape(-1)
    n = len(s)
    order = _stable_if_distinct(-s)
    if order is not None:
        return order
    key = s.tolist()
    a = list(range(n))

    def comp(x, y):  # array_gt
        return key[x] > key[y]

    def insertion(first, last):
        for i in range(first + 1, last):
            val = a[i]
            if comp(val, a[first]):
                a[first + 1:i + 1] = a[first:i]
                a[first] = val
            else:
                unguarded_linear_insert(i)

    def unguarded_linear_insert(last):
        val = a[last]
        nxt = last - 1
        while comp(val, a[nxt]):
            a[last] = a[nxt]
            last = nxt
            nxt -= 1
        a[last] = val

    def adjust_heap(first, hole, length, value):
        top = hole
        second = hole
        while second < (length - 1) // 2:
            second = 2 * (second + 1)
            if comp(a[first + second], a[first + second - 1]):
                second -= 1
            a[first + hole] = a[first + second]
            hole = second
        if (length & 1) == 0 and second == (length - 2) // 2:
            second = 2 * (second + 1)
            a[first + hole] = a[first + second - 1]
            hole = second - 1
        parent = (hole - 1) // 2
        while hole > top and comp(a[first + parent], value):
            a[first + hole] = a[first + parent]
            hole = parent
            parent = (hole - 1) // 2
        a[first + hole] = value

    def heap_sort(first, last):
        length = last - first
        if length >= 2:
            parent = (length - 2) // 2
            while True:
                adjust_heap(first, parent, length, a[first + parent])
                if parent == 0:
                    break
                parent -= 1
        while last - first > 1:
            last -= 1
            value = a[last]
            a[last] = a[first]
            adjust_heap(first, 0, last - first, value)

    def median_to_first(result, x, y, z):
        if comp(a[x], a[y]):
            if comp(a[y], a[z]):
                a[result], a[y] = a[y], a[result]
            elif comp(a[x], a[z]):
                a[result], a[z] = a[z], a[result]
            else:
                a[result], a[x] = a[x], a[result]
        elif comp(a[x], a[z]):
            a[result], a[x] = a[x], a[result]
        elif comp(a[y], a[z]):
            a[result], a[z] = a[z], a[result]
        else:
            a[result], a[y] = a[y], a[result]

    def partition(first, last, pivot):
        while True:
            while comp(a[first], a[pivot]):
                first += 1
            last -= 1
            while comp(a[pivot], a[last]):
                last -= 1
            if not first < last:
                return first
            a[first], a[last] = a[last], a[first]
            first += 1

    def introsort(first, last, depth):
        while last - first > 16:
            if depth == 0:
                heap_sort(first, last)
                return
            depth -= 1
            mid = first + (last - first) // 2
            median_to_first(first, first + 1, mid, last - 1)
            cut = partition(first + 1, last, first)
            introsort(cut, last, depth)
            last = cut

    if n > 1:
        introsort(0, n, (n.bit_length() - 1) * 2)
        if n > 16:
            insertion(0, 16)
            for i in range(16, n):
                unguarded_linear_insert(i)
        else:
            insertion(0, n)
    return np.array(a, dtype=np.int64)
