#!/usr/bin/env python3
"""A glslc-compatible front end over slang's glslang library, for building llama.cpp's Vulkan
backend as a benchmark peer on Debian 12, whose glslc (shaderc 2023.2) knows neither
GL_KHR_cooperative_matrix nor GL_NV_cooperative_matrix2: without them llama.cpp builds only its
scalar matmul kernels and would be timed below its real speed.

Takes the arguments llama.cpp's build passes to glslc: -fshader-stage=compute, --target-env=
vulkan1.2|vulkan1.3, -O, -DNAME[=VALUE], -I dir, -o out ('-' for stdout), -MD -MF depfile (a
make rule naming the source and the files it includes), one source file.
SPIR-V 1.5 for vulkan1.2, 1.6 for vulkan1.3. The library is VRUN_SLANG_GLSLANG, else the one
scripts/setup.sh fetched into ${VRUN_CACHE:-~/.cache/vrun}/tools.
"""
import glob
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "kernels", "vulkan"))
import glslang_cm2 as g  # noqa: E402  (include expansion and the compile call)


def library():
    lib = os.environ.get("VRUN_SLANG_GLSLANG")
    if lib:
        return lib
    cache = os.environ.get("VRUN_CACHE") or os.path.expanduser("~/.cache/vrun")
    found = sorted(glob.glob(os.path.join(cache, "tools", "slang-glslang-*", "libslang-glslang-*.so")))
    if not found:
        sys.exit("glslc_slang: no slang glslang library (run scripts/setup.sh, or set VRUN_SLANG_GLSLANG)")
    return found[-1]


def main(argv):
    if "--version" in argv:
        print("glslc_slang (slang glslang)")
        return 0
    defines, includes, out, src, env, depfile = [], [], None, None, "vulkan1.2", None
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "-o":
            out = argv[i + 1]
            i += 2
            continue
        if a == "-MF":
            depfile = argv[i + 1].strip('"')
            i += 2
            continue
        if a == "-I":
            includes.append(argv[i + 1])
            i += 2
            continue
        if a.startswith("-D"):
            defines.append(a[2:])
        elif a.startswith("-I"):
            includes.append(a[2:])
        elif a.startswith("--target-env="):
            env = a.split("=", 1)[1]
        elif a and not a.startswith("-"):
            src = a.strip('"')
        i += 1
    if not src or not out:
        sys.exit("glslc_slang: need a source file and -o")
    lines, origin = [], []
    g.expand(src, includes, lines, origin, [])
    # -D definitions go right after #version, where glslc puts them.
    defs = []
    for d in defines:
        name, _, value = d.partition("=")
        defs.append("#define %s %s" % (name, value) if value else "#define %s" % name)
    at = next((n + 1 for n, line in enumerate(lines) if line.strip().startswith("#version")), 0)
    lines[at:at] = defs
    text = ("\n".join(lines) + "\n").encode()

    version = (1, 6, 0) if env == "vulkan1.3" else (1, 5, 0)
    rc, code, msg = g.compile_glsl(library(), src, text, env, version)
    if rc != 0 or len(code) < 20:
        sys.stderr.write((msg or "glslc_slang: %s: compilation failed" % src) + "\n")
        return 1
    if out == "-":
        sys.stdout.buffer.write(code)
    else:
        with open(out, "wb") as f:
            f.write(code)
    if depfile:
        files = list(dict.fromkeys(path for path, _ in origin))
        with open(depfile, "w", encoding="utf-8") as f:
            f.write("%s: %s\n" % (out, " ".join(files)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
