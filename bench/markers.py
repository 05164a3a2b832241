"""Citation-marker cleanup on hostile answers: CPU seconds at growing sizes (issue 17, item 2).

    python bench/markers.py

prints, for each size, the CPU time (``time.process_time``) of

* ``filter``: ``MarkerFilter`` fed "Answer [1" and then ",1" two characters at a time, never closed
  (what a stream of a marker without its "]" does), then flushed;
* ``nested``: ``clean_markers`` on ``[[[...[99]99]99]`` of that size;

and the ratio to the smallest size. Linear cost: the ratio grows like the size (x4, x16). Measured here
(2 shared cores): after the fix, filter 0.03 / 0.13 / 0.60 s and nested 0.15 / 0.61 / 2.15 s at
20 / 80 / 320 KB; before it (c821bf2), filter 5.9 / 94 s and nested 0.7 / 16.5 s at 20 / 80 KB (x16 and x23
for x4 the size: quadratic; 320 KB was not waited for, the probe saw 109 s).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rag.answers.citations import clean_markers  # noqa: E402
from rag.answers.pipeline import MarkerFilter  # noqa: E402

SIZES_KB = (20, 80, 320)


def filter_seconds(size: int) -> float:
    started = time.process_time()
    markers = MarkerFilter({1, 2, 3})
    markers.feed("Answer [1")
    for _ in range(size // 2):
        markers.feed(",1")
    markers.flush()
    return time.process_time() - started


def nested_seconds(size: int) -> float:
    depth = size // 4
    text = "[" * depth + "99" + "]99" * (depth - 1) + "]"
    started = time.process_time()
    clean_markers(text, {1, 2, 3})
    return time.process_time() - started


def main() -> None:
    print(f"{'case':<8} {'size':>7} {'CPU s':>8} {'ratio':>7}")
    for name, measure in (("filter", filter_seconds), ("nested", nested_seconds)):
        base = None
        for kb in SIZES_KB:
            seconds = measure(kb * 1024)
            base = base or seconds
            print(f"{name:<8} {kb:>5} KB {seconds:>8.3f} {seconds / base:>6.1f}x")


if __name__ == "__main__":
    main()
