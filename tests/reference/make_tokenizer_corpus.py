"""Writes the tokenizer parity corpus: >= 2,000 cases mixing English, code, numbers, whitespace
runs, emoji, CJK, accented and other scripts, invalid UTF-8, special-token strings and long words.

One case per line, escaped so that any bytes fit on a line: \\n \\r \\t \\\\ and \\xNN for bytes
that are not printable ASCII or part of valid UTF-8. Deterministic (fixed seed).
"""
import random
import sys

WORDS = ("the quick brown fox jumps over lazy dog we they you I it is was were be been have has had do does "
         "did say said get make go know take see come think look want give use find tell ask work seem feel "
         "try leave call good new first last long great little own other old right big high different small "
         "large next early young important few public bad same able transformer tokenizer attention model "
         "Hello World OpenAI HuggingFace London Paris January Monday PyTorch GPU CPU").split()
CONTRACTIONS = ["don't", "I'm", "you're", "we've", "they'll", "she'd", "it's", "DON'T", "I'M", "We'LL", "'s", "o'clock",
                "rock'n'roll", "y'all", "can't", "won't"]
CODE = [
    "def f(x):\n    return x ** 2 + 1",
    "for (int i = 0; i < n; ++i) { sum += a[i]; }",
    "if __name__ == \"__main__\":\n\tmain()",
    "#include <vector>\nstd::vector<int> v{1, 2, 3};",
    "SELECT id, name FROM users WHERE age >= 21 ORDER BY name;",
    "const x = await fetch(`/api/v1/items?id=${id}`);",
    "fn main() { println!(\"{}\", 42); }",
    "    self.weight = nn.Parameter(torch.zeros(out_features, in_features))",
    "x = {'a': [1, 2.5, -3e-7], \"b\": None}  # comment",
    "<div class=\"row\"><span>&nbsp;</span></div>",
    "$ ls -la /usr/local/bin | grep -E '^d' && echo ok",
    "a+=b;c-=d;e*=f;g/=h;i%=j;k<<=1;l>>=2;m&&n||!o",
]
EMOJI = ["😀", "🎉", "👍🏽", "👨‍👩‍👧‍👦", "🇫🇷", "🇯🇵", "❤️", "🤖", "🧠", "☕", "🚀✨", "🏳️‍🌈", "😂😂😂", "🙏"]
CJK = ["你好，世界！", "机器学习模型", "日本語のテキストです。", "東京タワー", "한국어 문장입니다", "中文和English混合",
       "ｆｕｌｌｗｉｄｔｈ　ｓｐａｃｅ", "漢字かなカナ", "大規模言語模型"]
ACCENTS = ["café", "naïve", "Ærøskøbing", "Straße", "Crème brûlée", "Tiếng Việt có dấu", "Ωμέγα", "Привет, мир",
           "مرحبا بالعالم", "नमस्ते दुनिया", "שלום", "ñandú", "e\u0301te\u0301 (combining)", "İstanbul", "ﬁnance ﬂow",
           "Ångström", "Zürich", "ÀÉÎÕÜ", "ǅemal", "ß ẞ"]
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|startoftranscript|>", "<|en|>", "<|transcribe|>",
            "<|notimestamps|>", "<|translate|>", "<|startoflm|>", "<|nocaptions|>", "<repo_name>", "<file_sep>",
            "<|0.00|>", "<s>", "</s>", "<unk>", "<|begin_of_text|>", "<|eot_id|>", "<|im_start", "|endoftext|>",
            "<|endoftext|", "<<|im_end|>>", "<|endoftext|><|endoftext|>"]
INVALID = [b"\xff", b"\xfe\xff", b"\x80", b"\xbf\xbf", b"\xc3", b"\xe2\x82", b"\xf0\x9f\x98", b"\xc0\x80", b"\xc1\xbf",
           b"\xe0\x80\x80", b"abc\xe9def", b"\xf0\x9f", b"caf\xe9", b"\x9f\x98\x80"]
WS = [" ", "  ", "   ", "\t", "\n", "\n\n", "\r\n", " \n", "\n ", "\t\t", "    ", "        ", " \t \n", "\u00a0",
      "\u3000", "\u2009", "\v", "\f"]


def number(r):
    k = r.randrange(8)
    if k == 0:
        return str(r.randrange(10 ** r.randrange(1, 15)))
    if k == 1:
        return f"{r.uniform(-1e4, 1e4):.{r.randrange(0, 7)}f}"
    if k == 2:
        return f"{r.randrange(1, 13):02d}/{r.randrange(1, 29):02d}/{r.randrange(1900, 2100)}"
    if k == 3:
        return f"+1 ({r.randrange(100, 999)}) {r.randrange(100, 999)}-{r.randrange(1000, 9999)}"
    if k == 4:
        return f"{r.uniform(0, 10):.3e}"
    if k == 5:
        return f"{r.randrange(1000000):,}"
    if k == 6:
        return "v" + ".".join(str(r.randrange(20)) for _ in range(3))
    return "٣٤٥ ०१२ ²³ ½ Ⅻ"


def random_unicode(r, n):
    ranges = [(0x20, 0x7E), (0xA0, 0x24F), (0x370, 0x3FF), (0x400, 0x4FF), (0x590, 0x6FF), (0x900, 0x97F),
              (0x3040, 0x30FF), (0x4E00, 0x9FFF), (0xAC00, 0xD7A3), (0x1F300, 0x1F64F), (0x2000, 0x206F),
              (0xFF00, 0xFFEF), (0x1D400, 0x1D7FF)]
    out = []
    for _ in range(n):
        lo, hi = r.choice(ranges)
        out.append(chr(r.randint(lo, hi)))
    return "".join(out)


def sentence(r):
    words = [r.choice(WORDS) for _ in range(r.randrange(3, 16))]
    if r.random() < 0.4:
        words.insert(r.randrange(len(words)), r.choice(CONTRACTIONS))
    s = " ".join(words)
    return s[0].upper() + s[1:] + r.choice([".", "!", "?", "...", ",", ";", ""])


def piece(r):
    k = r.randrange(11)
    if k <= 2:
        return sentence(r)
    if k == 3:
        return r.choice(CODE)
    if k == 4:
        return number(r)
    if k == 5:
        return r.choice(EMOJI) * r.randrange(1, 3)
    if k == 6:
        return r.choice(CJK)
    if k == 7:
        return r.choice(ACCENTS)
    if k == 8:
        return r.choice(SPECIALS)
    if k == 9:
        return r.choice(WS) * r.randrange(1, 4)
    return random_unicode(r, r.randrange(1, 12))


def long_case(r):
    k = r.randrange(6)
    if k == 0:
        return r.choice("ab xz") * r.randrange(97, 400)
    if k == 1:
        return " " * r.randrange(97, 300) + "end"
    if k == 2:
        return "".join(r.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/") for _ in range(r.randrange(100, 300)))
    if k == 3:
        return "https://example.com/" + "-".join(r.choice(WORDS) for _ in range(30)) + "?q=" + "x" * 120
    if k == 4:
        return r.choice(CJK) * r.randrange(10, 30)
    return "\n" * r.randrange(20, 120) + "\t" * r.randrange(10, 60)


def make_cases(n=2400, seed=1234):
    r = random.Random(seed)
    cases = []
    fixed = [s.encode() for s in SPECIALS + CODE + EMOJI + CJK + ACCENTS + WS + CONTRACTIONS]
    fixed += INVALID + [b"", b" ", b"a", b"0", b"12345678901234567890", b"  leading", b"trailing  ", b"\n\nx\n\n"]
    cases.extend(fixed)
    while len(cases) < n:
        k = r.random()
        if k < 0.04:
            cases.append(long_case(r).encode())
            continue
        parts = [piece(r) for _ in range(r.randrange(1, 6))]
        seps = [r.choice([" ", "", "\n", " ", ", "]) for _ in parts]
        text = "".join(p + s for p, s in zip(parts, seps)).encode()
        if r.random() < 0.07:  # splice invalid bytes in somewhere
            at = r.randrange(len(text) + 1)
            text = text[:at] + r.choice(INVALID) + text[at:]
        cases.append(text)
    return cases


def escape(b):
    out = []
    i = 0
    while i < len(b):
        c = b[i]
        if c == 0x5C:
            out.append("\\\\")
        elif c == 0x0A:
            out.append("\\n")
        elif c == 0x0D:
            out.append("\\r")
        elif c == 0x09:
            out.append("\\t")
        elif 0x20 <= c < 0x7F:
            out.append(chr(c))
        elif c >= 0x80:
            # keep valid UTF-8 characters readable
            for n in (4, 3, 2):
                try:
                    ch = b[i:i + n].decode("utf-8")
                    if len(ch) == 1:
                        out.append(ch)
                        i += n
                        break
                except UnicodeDecodeError:
                    pass
            else:
                out.append(f"\\x{c:02x}")
                i += 1
            continue
        else:
            out.append(f"\\x{c:02x}")
        i += 1
    return "".join(out)


def unescape(line):
    out = bytearray()
    i = 0
    while i < len(line):
        ch = line[i]
        if ch == "\\":
            nxt = line[i + 1]
            if nxt == "x":
                out.append(int(line[i + 2:i + 4], 16))
                i += 4
                continue
            out += {"n": b"\n", "r": b"\r", "t": b"\t", "\\": b"\\"}[nxt]
            i += 2
            continue
        out += ch.encode("utf-8")
        i += 1
    return bytes(out)


if __name__ == "__main__":
    cases = make_cases()
    with open(sys.argv[1], "w", encoding="utf-8", newline="\n") as f:
        for c in cases:
            e = escape(c)
            assert unescape(e) == c
            f.write(e + "\n")
    print(f"{len(cases)} cases -> {sys.argv[1]}")
