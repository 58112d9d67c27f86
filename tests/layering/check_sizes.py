#!/usr/bin/env python3
"""Fails when a product function is over 150 lines or a product file over 600.

Product code is runtime, kernels, preprocess, models and apps; tests/ and bench/ may be longer.
A function is counted from the first line of its signature to its closing brace, lambdas and
local classes inside it included; a member function defined inside a class body counts on its own.
Usage: check_sizes.py [ROOT]
"""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tree_check  # noqa: E402

MAX_FUNCTION_LINES = 150
MAX_FILE_LINES = 600
# The closing lines, and the self-test's words (tree_check.main).
FAILED = "{} function(s) or file(s) over the limits"
PASSED = f"sizes: no product function over {MAX_FUNCTION_LINES} lines, no file over {MAX_FILE_LINES}"
SELF_TEST_WORDS = ("long code", "short code", "long pieces found, no short one flagged")
SOURCE_DIRS = ["runtime", "kernels", "preprocess", "models", "apps"]
SUFFIXES = (".h", ".hpp", ".cpp", ".cc", ".inc")
CONTAINER = re.compile(r'\b(namespace|class|struct|union|enum)\b|\bextern\s+"C"')
NAME = re.compile(r'([A-Za-z_~][\w:~<>]*)\s*\(')


def strip(text):
    """The text with comments, string and character literals blanked; newlines are kept."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("".join(ch if ch == "\n" else " " for ch in text[i:j]))
            i = j
        elif c == "R" and text.startswith('R"', i) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            m = re.match(r'R"([^(\s]*)\(', text[i:])
            if not m:
                out.append(c)
                i += 1
                continue
            end = text.find(")" + m.group(1) + '"', i)
            j = n if end < 0 else end + len(m.group(1)) + 2
            out.append("".join(ch if ch == "\n" else " " for ch in text[i:j]))
            i = j
        elif c in "\"'":
            if c == "'" and i > 0 and text[i - 1].isalnum():
                out.append(c)  # a digit separator: 1'000
                i += 1
                continue
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            out.append(c + " " * (j - i - 2) + c if j - i >= 2 else text[i:j])
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def drop_directives(code):
    """The code with preprocessor lines (and their continuations) blanked."""
    out, directive = [], False
    for line in code.split("\n"):
        directive = directive or line.lstrip().startswith("#")
        out.append(" " * len(line) if directive else line)
        directive = directive and line.rstrip().endswith("\\")
    return "\n".join(out)


def functions(text):
    """(name, first line, line count) of each function body not nested in another function."""
    code = drop_directives(strip(text))
    found = []
    stack = []  # per open brace: "container", "function" or "block"
    head_start = 0  # where the text before the next brace begins
    for i, c in enumerate(code):
        if c in ";}":
            if c == "}" and stack:
                kind, start, name = stack.pop()
                if kind == "function":
                    first = code.count("\n", 0, start) + 1
                    last = code.count("\n", 0, i) + 1
                    found.append((name, first, last - first + 1))
            head_start = i + 1
        elif c == "{":
            head = code[head_start:i]
            if any(k == "function" for k, _, _ in stack) or any(k == "block" for k, _, _ in stack):
                stack.append(("block", i, None))
            elif CONTAINER.search(head) and "(" not in head.split("{")[0].split(":")[0]:
                stack.append(("container", i, None))
            elif ")" in head and "=" not in head.split("(")[0]:
                names = NAME.findall(head)
                start = head_start + len(head) - len(head.lstrip())
                stack.append(("function", start, names[0] if names else "?"))
            else:
                stack.append(("block", i, None))
            head_start = i + 1
    return found


def check(root):
    problems = []
    for full, rel in tree_check.source_files(root, SOURCE_DIRS, SUFFIXES):
        with open(full, encoding="utf-8", errors="replace") as f:
            text = f.read()
        lines = text.count("\n") + (0 if text.endswith("\n") or not text else 1)
        if lines > MAX_FILE_LINES:
            problems.append(f"{rel}: {lines} lines (a file may have {MAX_FILE_LINES})")
        for fn, first, count in functions(text):
            if count > MAX_FUNCTION_LINES:
                problems.append(f"{rel}:{first}: {fn} is {count} lines (a function may have {MAX_FUNCTION_LINES})")
    return problems


def planted():
    """The self-test's tree: the check finds a long function and a long file in it, and passes short ones."""
    body = "    x += 1;\n"
    cases = {
        "models/llama/long_fn.cpp": "namespace vrun {\nint f(int x) {\n" + body * 160 + "    return x;\n}\n}\n",
        "runtime/long_file.cpp": "int g() { return 1; }\n" * 620,
        "kernels/cpu/long_member.h": "struct S {\n    void run() const {\n" + body * 151 + "    }\n};\n",
        "apps/cli/long_lambda.cpp": "void h() {\n    auto l = [&](int x) {\n" + body * 160 + "    };\n}\n",
    }
    clean = {
        "models/whisper/ok.cpp": (
            "#define INLINE inline __attribute__((always_inline))\nnamespace vrun {\n"
            "/* { not a brace */\nconst char* s = \"{{{\";\nconst int t[] = {1, 2, 3};\n"
            "struct A : B {\n    int f() { return 1; }\n};\n"
            "int g(int x) {\n" + body * 140 + "    return x;\n}\n"
            "int k(int x) {\n" + body * 140 + "    return x;\n}\n}\n"),
        "tests/long_test.cpp": "void t() {\n" + body * 400 + "}\n",
        "bench/long_bench.cpp": "int b() { return 1; }\n" * 700,
    }
    return cases, clean


if __name__ == "__main__":
    sys.exit(tree_check.main(check, planted, SELF_TEST_WORDS, FAILED, PASSED))
