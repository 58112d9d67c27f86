#!/usr/bin/env python3
"""Compiles a GLSL compute shader to SPIR-V 1.6 (Vulkan 1.3) with the glslang inside slang's
libslang-glslang-*.so, for shaders that need GL_NV_cooperative_matrix2, which no glslang this
project can install as a program knows. The library's C entry point, glslang_compile_1_2, takes
one source string and resolves no #include, so this script expands `#include "file"` itself
(relative to the including file, then the -I folders) and maps the compiler's line numbers back
to the files they came from in its error messages.

    glslang_cm2.py --lib libslang-glslang-2026.12.so -I kernels/vulkan -o out.spv in.comp

Exit status 0 with the SPIR-V written, 1 with the compiler's messages on stderr.
"""
import argparse
import ctypes
import os
import re
import sys

OUTPUT_FUNC = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p)


class SpirvVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_int), ("minor", ctypes.c_int), ("patch", ctypes.c_int)]


class CompileRequest(ctypes.Structure):  # glslang_CompileRequest_1_2 of slang-glslang.h
    _fields_ = [
        ("sizeInBytes", ctypes.c_size_t),
        ("sourcePath", ctypes.c_char_p),
        ("inputBegin", ctypes.c_void_p),
        ("inputEnd", ctypes.c_void_p),
        ("diagnosticFunc", OUTPUT_FUNC),
        ("diagnosticUserData", ctypes.c_void_p),
        ("outputFunc", OUTPUT_FUNC),
        ("outputUserData", ctypes.c_void_p),
        ("slangStage", ctypes.c_int),
        ("action", ctypes.c_uint),
        ("optimizationLevel", ctypes.c_uint),
        ("debugInfoType", ctypes.c_uint),
        ("spirvTargetName", ctypes.c_char_p),
        ("spirvVersion", SpirvVersion),
        ("entryPointName", ctypes.c_char_p),
    ]


SLANG_STAGE_COMPUTE = 6
ACTION_COMPILE_GLSL_TO_SPIRV = 0
OPTIMIZATION_DEFAULT = 1
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"\s*(//.*)?$')
INCLUDE_EXTENSION = re.compile(r"^\s*#\s*extension\s+GL_GOOGLE_include_directive\b")


def expand(path, include_dirs, lines, origin, stack):
    """Appends path's lines to `lines`, with includes expanded; origin[i] = (file, line)."""
    real = os.path.realpath(path)
    if real in stack:
        raise SystemExit(f"glslang_cm2: {path} includes itself")
    with open(path, encoding="utf-8") as f:
        text = f.read().splitlines()
    for n, line in enumerate(text, 1):
        m = INCLUDE.match(line)
        if m:
            name = m.group(1)
            for d in [os.path.dirname(path)] + include_dirs:
                cand = os.path.join(d, name)
                if os.path.isfile(cand):
                    expand(cand, include_dirs, lines, origin, stack + [real])
                    break
            else:
                raise SystemExit(f"{path}:{n}: cannot find included file '{name}'")
            continue
        if INCLUDE_EXTENSION.match(line):
            line = ""  # nothing left to include; the extension would only draw a warning
        lines.append(line)
        origin.append((path, n))


def compile_glsl(lib_path, source_name, src, target_env="vulkan1.3", spirv_version=(1, 6, 0)):
    """Compiles one GLSL compute source (bytes, includes expanded) with the library at lib_path:
    (status, SPIR-V bytes, the compiler's messages as text)."""
    try:
        lib = ctypes.CDLL(lib_path)
        compile_fn = lib.glslang_compile_1_2
    except (OSError, AttributeError) as e:
        raise SystemExit(f"glslang_cm2: cannot use {lib_path}: {e}")
    compile_fn.restype = ctypes.c_int
    compile_fn.argtypes = [ctypes.POINTER(CompileRequest)]

    diag, out = [], []
    on_diag = OUTPUT_FUNC(lambda d, n, _: diag.append(ctypes.string_at(d, n)))
    on_out = OUTPUT_FUNC(lambda d, n, _: out.append(ctypes.string_at(d, n)))
    buf = ctypes.create_string_buffer(src, len(src))
    begin = ctypes.addressof(buf)
    req = CompileRequest(
        ctypes.sizeof(CompileRequest), source_name.encode(), ctypes.c_void_p(begin), ctypes.c_void_p(begin + len(src)),
        on_diag, None, on_out, None, SLANG_STAGE_COMPUTE, ACTION_COMPILE_GLSL_TO_SPIRV, OPTIMIZATION_DEFAULT, 0,
        target_env.encode(), SpirvVersion(*spirv_version), b"main")
    rc = compile_fn(ctypes.byref(req))
    text = b"".join(diag).decode(errors="replace")
    # The library warns that it does not know SPIR-V 1.6 by name; it writes 1.6 all the same.
    text = "\n".join(l for l in text.splitlines() if l.strip() and l.strip() != "warning: unknown SPIR-V version")
    return rc, b"".join(out), text


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lib", required=True, help="libslang-glslang-*.so")
    ap.add_argument("-I", dest="include", action="append", default=[], help="include folder")
    ap.add_argument("-o", dest="output", required=True, help="SPIR-V file to write")
    ap.add_argument("source", help="GLSL compute shader")
    args = ap.parse_args()

    lines, origin = [], []
    expand(args.source, args.include, lines, origin, [])
    src = ("\n".join(lines) + "\n").encode()

    rc, spirv, text = compile_glsl(args.lib, args.source, src)

    # Messages name the expanded source's lines: point them at the file and line they came from.
    def where(m):
        i = int(m.group(1)) - 1
        return f"{origin[i][0]}:{origin[i][1]}:" if 0 <= i < len(origin) else m.group(0)

    pat = re.compile(re.escape(args.source) + r":(\d+):")
    text = pat.sub(where, text)
    if rc != 0 or len(spirv) < 20 or spirv[:4] != b"\x03\x02\x23\x07":
        sys.stderr.write(text + "\n" if text else f"glslang_cm2: {args.source}: compilation failed (status {rc})\n")
        return 1
    if text:
        sys.stderr.write(text + "\n")
    with open(args.output, "wb") as f:
        f.write(spirv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
