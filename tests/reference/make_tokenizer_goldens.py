"""Makes the tokenizer parity goldens in tests/data/tokenizer from the reference implementations:
Hugging Face `tokenizers` (Whisper tiny.en tokenizer.json), llama.cpp through llama-cpp-python with
vocab_only=True (SmolLM2's GGUF vocabulary), `tiktoken` (a rank file built from the Whisper
vocabulary) and `sentencepiece` (BPE and unigram models trained here by Debian's spm_train).

Run tests/reference/setup_tokenizer_venv.sh first, then:
    /tmp/vrun-tok-venv/bin/python tests/reference/make_tokenizer_goldens.py
Outputs (ids: one line per corpus case, space separated, gzip):
    corpus.txt                          the cases (make_tokenizer_corpus.py)
    whisper-tiny.en.tokenizer.json.gz   fixture: the real tokenizer.json
    smollm2-tokenizer.gguf.gz           fixture: a GGUF holding only the real file's tokenizer.* keys
    spm_bpe.model, spm_unigram.model    fixtures: SentencePiece models
    <name>.ids.gz                       reference ids per tokenizer (and .nospecial: special tokens as text)
    <spm>.decoded.txt.gz                sentencepiece's own decode of the reference ids
    chat_smollm2.json                   SmolLM2's chat template rendered by jinja2
"""
import gzip
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from make_tokenizer_corpus import escape, make_cases  # noqa: E402

OUT = os.path.join(HERE, "..", "data", "tokenizer")
VENV = os.environ.get("VENV", "/tmp/vrun-tok-venv")
GGUF = os.path.join(VENV, "models", "smollm2.gguf")
WHISPER_JSON = os.path.join(VENV, "models", "whisper-tokenizer.json")
QWEN2_PATTERN = (r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|"
                 r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
                  r"\s*[\r\n]+|\s+(?!\S)|\s+")


def write_ids(name, rows):
    text = "".join(" ".join(map(str, ids)) + "\n" for ids in rows)
    write_gzip(name + ".ids.gz", text.encode("ascii"))


def write_gzip(name, data):
    # mtime=0 so regenerating unchanged goldens leaves the files byte-identical.
    with open(os.path.join(OUT, name), "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=9, mtime=0) as f:
        f.write(data)


def write_texts(name, texts):
    write_gzip(name, "".join(escape(t.encode("utf-8")) + "\n" for t in texts).encode("utf-8"))


def as_text(case):
    # What a Python caller hands the reference for these bytes.
    return case.decode("utf-8", errors="replace")


def whisper(cases):
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(WHISPER_JSON)
    write_ids("whisper", [tok.encode(as_text(c), add_special_tokens=False).ids for c in cases])
    tok.encode_special_tokens = True
    write_ids("whisper.nospecial", [tok.encode(as_text(c), add_special_tokens=False).ids for c in cases])
    with open(WHISPER_JSON, "rb") as src:
        write_gzip("whisper-tiny.en.tokenizer.json.gz", src.read())
    # The configuration Llama-3 and Qwen2 tokenizer.json files use: Split(regex) then ByteLevel without
    # its own regex, and ignore_merges; same vocabulary (tokenizer_parity_test.cpp makes the same edit).
    with open(WHISPER_JSON, encoding="utf-8") as f:
        j = json.load(f)
    j["pre_tokenizer"] = qwen2_style_pre_tokenizer()
    j["model"]["ignore_merges"] = True
    tok = Tokenizer.from_str(json.dumps(j))
    write_ids("whisper_split_qwen2", [tok.encode(as_text(c), add_special_tokens=False).ids for c in cases])


def qwen2_style_pre_tokenizer():
    return {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": QWEN2_PATTERN}, "behavior": "Isolated", "invert": False},
        {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}]}


def tiktoken_ranks(cases):
    import tiktoken
    with open(WHISPER_JSON, encoding="utf-8") as f:
        j = json.load(f)
    added = {a["id"] for a in j["added_tokens"]}
    byte_decoder = {}
    n = 256
    for b in range(256):
        printable = 33 <= b <= 126 or 161 <= b <= 172 or 174 <= b <= 255
        byte_decoder[chr(b) if printable else chr(n)] = b
        if not printable:
            n += 1
    ranks = {bytes(byte_decoder[ch] for ch in tok): i for tok, i in j["model"]["vocab"].items() if i not in added}
    enc = tiktoken.Encoding(name="whisper-ranks", pat_str=LLAMA3_PATTERN, mergeable_ranks=ranks, special_tokens={})
    write_ids("tiktoken_whisper_ranks", [enc.encode(as_text(c), disallowed_special=()) for c in cases])


def smollm2(cases):
    from llama_cpp import Llama
    llm = Llama(model_path=GGUF, vocab_only=True, verbose=False)
    write_ids("smollm2", [llm.tokenize(c, add_bos=False, special=True) if c else [] for c in cases])
    write_ids("smollm2.nospecial", [llm.tokenize(c, add_bos=False, special=False) if c else [] for c in cases])
    write_gguf_fixture()


def write_gguf_fixture():
    from gguf import GGUFReader, GGUFValueType, GGUFWriter
    r = GGUFReader(GGUF)
    tmp = os.path.join(tempfile.mkdtemp(), "tok.gguf")
    w = GGUFWriter(tmp, arch=bytes(r.fields["general.architecture"].parts[-1]).decode())
    for key, field in r.fields.items():
        if not key.startswith("tokenizer."):
            continue
        vtype = field.types[0]
        if vtype == GGUFValueType.ARRAY:
            sub = field.types[1]
            vals = [field.parts[i] for i in field.data]
            vals = [bytes(v).decode("utf-8") for v in vals] if sub == GGUFValueType.STRING else [v[0].item() for v in vals]
            w.add_key_value(key, vals, vtype, sub_type=sub)
        elif vtype == GGUFValueType.STRING:
            w.add_key_value(key, bytes(field.parts[-1]).decode("utf-8"), vtype)
        else:
            w.add_key_value(key, field.parts[-1][0].item(), vtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.close()
    with open(tmp, "rb") as src:
        write_gzip("smollm2-tokenizer.gguf.gz", src.read())


def sentencepiece_models(cases):
    import sentencepiece as spm
    train = os.path.join(tempfile.mkdtemp(), "train.txt")
    with open(train, "w", encoding="utf-8") as f:
        for c in cases:
            for line in as_text(c).splitlines():
                if line.strip():
                    f.write(line + "\n")
    configs = {
        "spm_bpe": ["--model_type=bpe", "--vocab_size=3000", "--byte_fallback=true", "--character_coverage=0.98",
                    "--user_defined_symbols=<|im_start|>,<|im_end|>"],
        "spm_unigram": ["--model_type=unigram", "--vocab_size=1500", "--character_coverage=0.98"],
    }
    for name, extra in configs.items():
        prefix = os.path.join(OUT, name)
        subprocess.run(["spm_train", f"--input={train}", f"--model_prefix={prefix}", "--num_threads=1",
                        "--shuffle_input_sentence=false", *extra], check=True, capture_output=True)
        os.remove(prefix + ".vocab")
        sp = spm.SentencePieceProcessor(model_file=prefix + ".model")
        rows = [sp.encode(as_text(c)) for c in cases]
        write_ids(name, rows)
        write_texts(name + ".decoded.txt.gz", [sp.decode(ids) for ids in rows])


def chat_template():
    import jinja2
    from gguf import GGUFReader
    r = GGUFReader(GGUF)
    source = bytes(r.fields["tokenizer.chat_template"].parts[-1]).decode("utf-8")
    env = jinja2.Environment()
    conversations = [
        [{"role": "user", "content": "Hello!"}],
        [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "What is 2+2?"}],
        [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello, how can I help?"},
         {"role": "user", "content": "Tell me a joke.\nA short one."}],
    ]
    out = []
    for conv in conversations:
        for gen in (True, False):
            out.append({"messages": conv, "add_generation_prompt": gen,
                        "rendered": env.from_string(source).render(messages=conv, add_generation_prompt=gen)})
    with open(os.path.join(OUT, "chat_smollm2.json"), "w", encoding="utf-8") as f:
        json.dump({"template": source, "cases": out}, f, ensure_ascii=False, indent=1)


def main():
    os.makedirs(OUT, exist_ok=True)
    cases = make_cases()
    with open(os.path.join(OUT, "corpus.txt"), "w", encoding="utf-8", newline="\n") as f:
        for c in cases:
            f.write(escape(c) + "\n")
    steps = sys.argv[1:] or ["whisper", "tiktoken", "spm", "chat", "smollm2"]
    if "whisper" in steps:
        whisper(cases)
    if "tiktoken" in steps:
        tiktoken_ranks(cases)
    if "spm" in steps:
        sentencepiece_models(cases)
    if "chat" in steps:
        chat_template()
    if "smollm2" in steps:
        smollm2(cases)
    print("goldens written to", os.path.normpath(OUT))


if __name__ == "__main__":
    main()
