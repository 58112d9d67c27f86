#!/usr/bin/env python3
"""Word error rate of HYPOTHESIS against REFERENCE (text files), after lower-casing and dropping
punctuation: (substitutions + deletions + insertions) / reference words, by word-level edit
distance. Standard library only.

  whisper_wer.py REFERENCE HYPOTHESIS
"""
import re
import sys


def words(path):
    text = open(path, encoding="utf-8").read().lower()
    return re.sub(r"[^\w\s']", " ", text).split()


def edit_distance(ref, hyp):
    prev = list(range(len(hyp) + 1))
    for i, r in enumerate(ref, 1):
        cur = [i] + [0] * len(hyp)
        for j, h in enumerate(hyp, 1):
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (r != h))
        prev = cur
    return prev[-1]


ref, hyp = words(sys.argv[1]), words(sys.argv[2])
print("%.4f %d %d" % (edit_distance(ref, hyp) / max(len(ref), 1), len(ref), len(hyp)))
