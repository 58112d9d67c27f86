"""What the tree checkers (check_layers.py, check_sizes.py) share: a self-test that writes planted
files into a temporary tree and wants each one flagged and nothing else, and the command line
(a root folder, or --self-test)."""
import os
import sys
import tempfile


def source_files(root, dirs, suffixes):
    """(full path, path relative to root with /) of every file under root/<dir> for dir in dirs
    whose name ends with one of suffixes, each folder's files in name order."""
    for top in dirs:
        for dirpath, _, files in os.walk(os.path.join(root, top)):
            for name in sorted(files):
                if name.endswith(suffixes):
                    full = os.path.join(dirpath, name)
                    yield full, os.path.relpath(full, root).replace(os.sep, "/")


def self_test(check, cases, clean, words):
    """cases / clean: path -> file text; words: (planted, clean, summary) for the messages."""
    planted, fine, summary = words
    with tempfile.TemporaryDirectory() as root:
        for path, text in {**cases, **clean}.items():
            os.makedirs(os.path.join(root, os.path.dirname(path)), exist_ok=True)
            with open(os.path.join(root, path), "w") as f:
                f.write(text if text.endswith("\n") else text + "\n")
        found = check(root)
    missed = [p for p in cases if not any(f.startswith(p + ":") for f in found)]
    wrong = [f for f in found if not any(f.startswith(p + ":") for p in cases)]
    for p in missed:
        print(f"self-test: the {planted} in {p} was not found")
    for f in wrong:
        print(f"self-test: {fine} was flagged: {f}")
    if missed or wrong:
        return 1
    print(f"self-test: all {len(cases)} {summary}")
    return 0


def main(check, planted, words, failed, passed):
    """planted(): the self-test's (cases, clean) and words its messages (see self_test);
    failed.format(n) / passed: the closing line."""
    if sys.argv[1:] == ["--self-test"]:
        return self_test(check, *planted(), words)
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
    problems = check(os.path.abspath(root))
    for p in problems:
        print(p)
    if problems:
        print(failed.format(len(problems)))
        return 1
    print(passed)
    return 0
