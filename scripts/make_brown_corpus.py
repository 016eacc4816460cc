#!/usr/bin/env python3
"""Builds a large benchmark corpus from the Brown corpus (never committed): its documents repeated in
a fresh shuffled order each round until the text reaches --size-mb, written in three forms holding
the same documents in the same order:

  OUT/brown.txt                 plain text (one paragraph a line, a blank line between documents)
  OUT/brown.jsonl.zst           JSONL, zstd level 3 ({"id": n, "text": "paragraph\\nparagraph"})
  OUT/parquet/part-NNNNN.parquet  Parquet, --parquet-files files, snappy, 1000-row row groups,
                                columns id (int64) and text (string), as Hugging Face datasets writes

usage: scripts/make_brown_corpus.py OUT [--brown DIR] [--size-mb 1024] [--parquet-files 8] [--seed 1]
Needs pyarrow and zstandard (scripts/setup.sh installs both into its venv). Used by
scripts/bench_prepare_formats.sh; docs/benchmarks.md has the figures.
"""
import argparse
import json
import os
import random

import pyarrow as pa
import pyarrow.parquet as pq
import zstandard


def brown_documents(path):
    docs, current = [], []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if line.strip(" \t"):
                current.append(line)
            elif current:
                docs.append("\n".join(current))
                current = []
    if current:
        docs.append("\n".join(current))
    return docs


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--brown", default=os.path.join(here, "..", "..", "shared", "data", "brown"))
    ap.add_argument("--size-mb", type=float, default=1024)
    ap.add_argument("--parquet-files", type=int, default=8)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()

    docs = brown_documents(os.path.join(args.brown, "train.txt"))
    target = int(args.size_mb * 1e6)
    rng = random.Random(args.seed)
    order, size = [], 0
    while size < target:  # whole shuffled rounds of the documents until the size is reached
        round_order = list(range(len(docs)))
        rng.shuffle(round_order)
        for i in round_order:
            order.append(i)
            size += len(docs[i].encode("utf-8")) + 2
            if size >= target:
                break

    os.makedirs(os.path.join(args.out, "parquet"), exist_ok=True)
    per_file = (len(order) + args.parquet_files - 1) // args.parquet_files
    schema = pa.schema([("id", pa.int64()), ("text", pa.string())])
    with open(os.path.join(args.out, "brown.txt"), "w", encoding="utf-8") as text_out, \
            open(os.path.join(args.out, "brown.jsonl.zst"), "wb") as raw:
        jsonl_out = zstandard.ZstdCompressor(level=3).stream_writer(raw)
        for part in range(args.parquet_files):
            rows = order[part * per_file:(part + 1) * per_file]
            path = os.path.join(args.out, "parquet", f"part-{part:05d}.parquet")
            with pq.ParquetWriter(path, schema, compression="snappy") as writer:
                for start in range(0, len(rows), 1000):
                    ids = list(range(part * per_file + start, part * per_file + start + len(rows[start:start + 1000])))
                    texts = [docs[i] for i in rows[start:start + 1000]]
                    writer.write_table(pa.table({"id": ids, "text": texts}, schema=schema), row_group_size=1000)
                    for n, t in zip(ids, texts):
                        text_out.write(t + "\n\n")
                        jsonl_out.write((json.dumps({"id": n, "text": t}) + "\n").encode("utf-8"))
        jsonl_out.close()
    print(f"{len(order)} documents, {size / 1e6:.1f} MB of text -> {args.out}")


if __name__ == "__main__":
    main()
