"""Writes the ~10 MB mixed benchmark text (valid UTF-8): the parity corpus generator run with many
seeds, so words repeat as in real text without the text being one block repeated."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "reference"))
from make_tokenizer_corpus import make_cases  # noqa: E402

target = int(float(sys.argv[2])) if len(sys.argv) > 2 else 10 * 1000 * 1000
out, size, seed = [], 0, 1
while size < target:
    for case in make_cases(n=2000, seed=seed):
        text = case.decode("utf-8", errors="replace")
        out.append(text)
        size += len(text.encode("utf-8")) + 1
    seed += 1
with open(sys.argv[1], "w", encoding="utf-8", newline="\n") as f:
    f.write("\n".join(out))
print(f"{size / 1e6:.1f} MB -> {sys.argv[1]}")
