"""Byte-level BPE (GPT-2 semantics): trainer, encoder/decoder, tokenizer.json I/O.

Pre-tokenizer: the GPT-2 regex
    's|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+
Python's `re` has no \\p{..} classes, so we use [A-Za-z] for \\p{L} and [0-9]
for \\p{N}.  For ASCII text (our corpus is pure ASCII) this is exactly the same
split; for non-ASCII letters it is not (they would fall in the "other" class).

Bytes of each pre-token are mapped to printable characters with GPT-2's
bytes_to_unicode() table, then merges are applied by rank (lowest rank first,
leftmost occurrence first), exactly as GPT-2 / Hugging Face `tokenizers` do.

Vocabulary layout: id 0 = "<|endoftext|>" (an added, special token that is
also present in model.vocab), ids 1..256 = the 256 byte characters in byte
order, then one id per merge in merge order.  The tokenizer adds no BOS.
"""
import collections
import json
import re

EOT = "<|endoftext|>"
PAT = re.compile(r"""'s|'t|'re|'ve|'m|'ll|'d| ?[A-Za-z]+| ?[0-9]+| ?[^\sA-Za-z0-9]+|\s+(?!\S)|\s+""")


def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


B2U = bytes_to_unicode()
U2B = {v: k for k, v in B2U.items()}


def pretokenize(text):
    return ["".join(B2U[b] for b in w.encode("utf-8")) for w in PAT.findall(text)]


def train(texts, vocab_size, min_count=2, log=print):
    """Learn merges until the vocab has vocab_size entries (or no pair occurs min_count times)."""
    words = collections.Counter()
    for t in texts:
        for part in t.split(EOT):
            words.update(pretokenize(part))
    wlist = [list(w) for w in words]
    freqs = [words[w] for w in words]
    pairs = collections.Counter()
    where = collections.defaultdict(set)
    for i, w in enumerate(wlist):
        for a, b in zip(w, w[1:]):
            pairs[a, b] += freqs[i]
            where[a, b].add(i)
    merges = []
    n_target = vocab_size - 1 - 256
    while len(merges) < n_target and pairs:
        # most frequent pair; ties broken by the pair's text (deterministic)
        best = max(pairs.items(), key=lambda kv: (kv[1], tuple(-ord(c) for c in kv[0][0] + " " + kv[0][1])))
        (a, b), cnt = best
        if cnt < min_count:
            break
        merges.append((a, b))
        ab = a + b
        for i in list(where[a, b]):
            w = wlist[i]
            f = freqs[i]
            for x, y in zip(w, w[1:]):
                pairs[x, y] -= f
                if pairs[x, y] <= 0:
                    del pairs[x, y]
            j, nw = 0, []
            while j < len(w):
                if j + 1 < len(w) and w[j] == a and w[j + 1] == b:
                    nw.append(ab)
                    j += 2
                else:
                    nw.append(w[j])
                    j += 1
            wlist[i] = nw
            for x, y in zip(nw, nw[1:]):
                pairs[x, y] += f
                where[x, y].add(i)
        del where[a, b]
        if log and len(merges) % 250 == 0:
            log(f"bpe: {len(merges)} merges, last {a!r}+{b!r} count {cnt}")
    return Tokenizer.from_merges(merges)


class Tokenizer:
    def __init__(self, vocab, merges):
        self.vocab = vocab  # str -> id
        self.inv = {i: s for s, i in vocab.items()}
        self.merges = merges
        self.ranks = {m: r for r, m in enumerate(merges)}
        self.cache = {}

    @classmethod
    def from_merges(cls, merges):
        vocab = {EOT: 0}
        for b in range(256):
            vocab[B2U[b]] = len(vocab)
        for a, b in merges:
            vocab[a + b] = len(vocab)
        return cls(vocab, merges)

    def __len__(self):
        return len(self.vocab)

    def _bpe(self, word):
        if word in self.cache:
            return self.cache[word]
        parts = list(word)
        while len(parts) > 1:
            best, bi = None, -1
            for i in range(len(parts) - 1):
                r = self.ranks.get((parts[i], parts[i + 1]))
                if r is not None and (best is None or r < best):
                    best, bi = r, i
            if best is None:
                break
            a, b = self.merges[best]
            out, i = [], 0
            while i < len(parts):  # merge every occurrence of (a, b), left to right
                if i + 1 < len(parts) and parts[i] == a and parts[i + 1] == b:
                    out.append(a + b)
                    i += 2
                else:
                    out.append(parts[i])
                    i += 1
            parts = out
        ids = [self.vocab[p] for p in parts]
        self.cache[word] = ids
        return ids

    def encode(self, text):
        """Text -> ids. "<|endoftext|>" in the text becomes id 0; no BOS is added."""
        ids = []
        for k, part in enumerate(text.split(EOT)):
            if k:
                ids.append(0)
            for w in pretokenize(part):
                ids.extend(self._bpe(w))
        return ids

    def decode(self, ids):
        out, buf = [], bytearray()
        for i in ids:
            s = self.inv[int(i)]
            if s == EOT:
                out.append(buf.decode("utf-8", errors="replace"))
                buf = bytearray()
                out.append(EOT)
            else:
                buf.extend(U2B[c] for c in s)
        out.append(buf.decode("utf-8", errors="replace"))
        return "".join(out)

    def to_json(self):
        return {
            "version": "1.0",
            "truncation": None,
            "padding": None,
            "added_tokens": [{"id": 0, "content": EOT, "single_word": False, "lstrip": False, "rstrip": False,
                              "normalized": False, "special": True}],
            "normalizer": None,
            "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
            "post_processor": None,
            "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
            "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                      "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False,
                      "vocab": self.vocab, "merges": [a + " " + b for a, b in self.merges]},
        }

    def save(self, path):
        with open(path, "w", encoding="utf-8") as f:
            json.dump(self.to_json(), f, ensure_ascii=False, indent=1)
            f.write("\n")

    @classmethod
    def load(cls, path):
        with open(path, encoding="utf-8") as f:
            j = json.load(f)
        merges = [tuple(m.split(" ")) for m in j["model"]["merges"]]
        return cls(j["model"]["vocab"], merges)
