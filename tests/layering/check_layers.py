#!/usr/bin/env python3
"""Fails when an #include climbs a layer or crosses between siblings.

Layers, lowest first (docs/architecture.md):
    base        runtime/base
    ops         kernels/ops
    runtime     runtime (the rest)
    backends    kernels/cpu | kernels/vulkan            (siblings)
    preprocess  preprocess
    models      readers (common, gguf, ...) < family builders llama | whisper | parakeet | onnx
                < registry (the families, one way in)
    apps        apps/common < runners llama | whisper | parakeet < speech (one interface over
                the speech runners) < front ends cli | serve | python

An include may point at its own folder or at a lower layer; siblings never include each other;
and above the backends nothing includes a backend's folder: models and front ends reach the
kernels through the runtime (Executor, Backend registry, run_host_op). tests/ and bench/ may look
anywhere. Usage: check_layers.py [ROOT]
"""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tree_check  # noqa: E402

# (path prefix, layer rank, sibling group or None). The longest matching prefix wins.
RULES = [
    ("runtime/base/", 0, None),
    ("kernels/ops/", 1, None),
    ("runtime/", 2, None),
    ("kernels/cpu/", 3, "backend"),
    ("kernels/vulkan/", 3, "backend"),
    ("kernels/", 3, None),  # kernels/CMakeLists.txt's composition only
    ("preprocess/", 4, None),
    ("models/llama/", 6, "family"),
    ("models/whisper/", 6, "family"),
    ("models/parakeet/", 6, "family"),
    ("models/onnx/", 6, "family"),
    ("models/registry/", 7, None),  # the families, one way in
    ("models/", 5, None),
    ("apps/common/", 8, None),
    ("apps/llama/", 9, "runner"),
    ("apps/whisper/", 9, "runner"),
    ("apps/parakeet/", 9, "runner"),
    ("apps/speech/", 10, None),  # the speech-recognition interface over the runners
    ("apps/", 11, None),  # front ends: cli, serve, python
]
BACKEND_RANK = 3
SOURCE_DIRS = ["runtime", "kernels", "preprocess", "models", "apps"]
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
# Run-time switches are read in one place (runtime/base/knobs.def lists them).
GETENV = re.compile(r'getenv\(\s*"VRUN_')
KNOBS_FILE = "runtime/base/knobs.cpp"
# The closing lines, and the self-test's words (tree_check.main).
FAILED = "{} include(s) break the layering (see docs/architecture.md)"
PASSED = "layering: every include points down or within its own folder"
SELF_TEST_WORDS = ("break", "a clean include", "breaks found, no clean include flagged")


def classify(path):
    best = None
    for prefix, rank, group in RULES:
        if path.startswith(prefix) and (best is None or len(prefix) > len(best[0])):
            best = (prefix, rank, group)
    return best


def check(root):
    problems = []
    for full, rel in tree_check.source_files(root, SOURCE_DIRS, (".h", ".hpp", ".cpp", ".cc", ".def", ".inc")):
        src = classify(rel)
        with open(full, encoding="utf-8", errors="replace") as f:
            for lineno, line in enumerate(f, 1):
                if GETENV.search(line) and rel != KNOBS_FILE:
                    problems.append(f"{rel}:{lineno}: reads a VRUN_ variable (add it to runtime/base/knobs.def)")
                m = INCLUDE.match(line)
                if not m:
                    continue
                target = m.group(1)
                if "/" not in target or target.split("/")[0] not in SOURCE_DIRS:
                    continue  # same folder, generated or third-party
                dst = classify(target)
                if src is None or dst is None:
                    continue
                where = f"{rel}:{lineno}: includes {target}"
                if dst[1] > src[1]:
                    problems.append(f"{where} (climbs from {src[0]} to {dst[0]})")
                elif dst[1] == src[1] and dst[2] is not None and src[0] != dst[0]:
                    problems.append(f"{where} (crosses between siblings {src[0]} and {dst[0]})")
                elif dst[1] == BACKEND_RANK and src[1] > BACKEND_RANK:
                    problems.append(f"{where} (reaches into a backend from {src[0]})")
    return problems


def planted():
    """The self-test's tree: the check finds each kind of break in it, and passes the clean files."""
    cases = {
        "runtime/base/a.h": '#include "runtime/executor.h"',         # climbs
        "kernels/cpu/b.cpp": '#include "kernels/vulkan/context.h"',  # siblings
        "apps/whisper/c.cpp": '#include "apps/llama/llama_runner.h"',  # sibling runners
        "models/parakeet/d.cpp": '#include "kernels/cpu/gemm.h"',    # into a backend
        "apps/cli/e.cpp": '#include "kernels/vulkan/context.h"',     # into a backend
        "kernels/vulkan/f.cpp": 'const char* e = std::getenv("VRUN_NEW");',  # a knob of its own
    }
    clean = {
        "apps/cli/ok.cpp": '#include "apps/llama/llama_runner.h"\n#include "runtime/base/status.h"',
        "kernels/cpu/ok.cpp": '#include "runtime/backend.h"\n#include "kernels/ops/attrs.h"',
        "models/whisper/ok.cpp": '#include "models/gguf/gguf.h"',
    }
    return cases, clean


if __name__ == "__main__":
    sys.exit(tree_check.main(check, planted, SELF_TEST_WORDS, FAILED, PASSED))
