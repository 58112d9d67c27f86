"""The peer: Hugging Face `tokenizers` encoding the benchmark text line by line (each line keeps its
newline) on one thread, as bench_tokenize does. Prints 'tokens seconds' (best of N runs) and writes
the ids for the identity check."""
import os
import sys
import time

os.environ["RAYON_NUM_THREADS"] = "1"
os.environ["TOKENIZERS_PARALLELISM"] = "false"
from tokenizers import Tokenizer  # noqa: E402

tokenizer_json, text_path, ids_path, runs = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
tok = Tokenizer.from_file(tokenizer_json)
with open(text_path, encoding="utf-8", newline="") as f:  # keep \r as it is
    text = f.read()
lines = [line + "\n" for line in text.split("\n")]
lines[-1] = lines[-1][:-1]
lines = [line for line in lines if line]
best = None
for _ in range(runs):
    t0 = time.perf_counter()
    encodings = tok.encode_batch(lines, add_special_tokens=False)
    dt = time.perf_counter() - t0
    best = dt if best is None else min(best, dt)
ids = [i for e in encodings for i in e.ids]
with open(ids_path, "w") as f:
    f.write(" ".join(map(str, ids)))
print(len(ids), best)
