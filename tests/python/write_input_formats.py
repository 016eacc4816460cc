#!/usr/bin/env python3
"""Writes one plain-text corpus in every input format roformer reads, with the real writers
(Python's gzip, zstandard, pyarrow), plus damaged copies, for tests/unit/test_input_formats.cpp.

usage: write_input_formats.py TEXT OUT_DIR

TEXT is plain text (one paragraph a line, a blank line between documents). Every file under OUT_DIR
holds the same documents, so each must prepare to the same token shards:
  docs.jsonl, docs.jsonl.gz (two gzip members), docs.jsonl.zst (two zstd frames, checksummed),
  docs.txt.gz, docs.txt.zst, gzip_named.txt (gzip data under a plain name),
  snappy_string.parquet (several row groups, nulls and empty strings between documents, an extra
  "id" column), zstd_large_string.parquet, gzip_dictionary.parquet, none_string_view.parquet,
  body_column.parquet (the text in a column named "body"),
  mixed/ (a_first.txt.gz, b_second.jsonl, c_third.parquet: the documents in thirds; also README.md
  and .hidden.txt, which a folder's expansion skips).
Damaged copies: truncated.jsonl.gz, truncated.jsonl.zst, truncated.parquet (cut at 60%),
corrupt.jsonl.gz (a flipped bit in the CRC32 trailer), corrupt.jsonl.zst (in the frame checksum),
corrupt.parquet (a flipped byte inside a data page, page checksums written), bad_utf8.parquet
(row 1 holds invalid UTF-8), not_gzip.txt.gz and not_parquet.parquet (plain text under those names).
"""
import gzip
import json
import os
import sys

import pyarrow as pa
import pyarrow.parquet as pq
import zstandard


def read_documents(path):
    """The documents of a plain-text file as roformer's reader splits them: lists of paragraphs."""
    docs, current = [], []
    with open(path, encoding="utf-8", newline="\n") as f:
        for line in f:
            line = line.rstrip("\n").removesuffix("\r")
            if line.strip(" \t") == "":
                if current:
                    docs.append(current)
                current = []
            else:
                current.append(line)
    if current:
        docs.append(current)
    return ["\n".join(paragraphs) for paragraphs in docs]


def write(path, data):
    with open(path, "wb") as f:
        f.write(data)


def as_text(texts):
    return "".join(t + "\n\n" for t in texts).encode("utf-8")


def as_jsonl(texts):
    return "".join(json.dumps({"id": i, "text": t}) + "\n" for i, t in enumerate(texts)).encode("utf-8")


def zstd_frames(data):
    """Two checksummed zstd frames, as a streaming writer that restarts would leave them."""
    c = zstandard.ZstdCompressor(write_checksum=True)
    half = len(data) // 2
    return c.compress(data[:half]) + c.compress(data[half:])


def write_parquet(path, texts, compression, kind="string", column="text", padded=False, **options):
    values = list(texts)
    if padded:  # nulls and empty strings between documents: rows without text are skipped
        values = [x for i, t in enumerate(texts) for x in ([None, t] if i % 3 == 0 else ["", t] if i % 3 == 1 else [t])]
    types = {"string": pa.string(), "large_string": pa.large_string(), "string_view": pa.string_view()}
    array = pa.array(values, type=types["string" if kind == "dictionary" else kind])
    if kind == "dictionary":
        array = array.dictionary_encode()
    table = pa.table({"id": pa.array(range(len(values)), type=pa.int64()), column: array})
    pq.write_table(table, path, compression=compression, row_group_size=7, **options)


def main():
    text_path, out = sys.argv[1], sys.argv[2]
    os.makedirs(os.path.join(out, "mixed"), exist_ok=True)
    texts = read_documents(text_path)
    jsonl = as_jsonl(texts)
    half = len(jsonl) // 2
    cut = jsonl.index(b"\n", half) + 1
    write(os.path.join(out, "docs.jsonl"), jsonl)
    write(os.path.join(out, "docs.jsonl.gz"), gzip.compress(jsonl[:cut]) + gzip.compress(jsonl[cut:]))
    write(os.path.join(out, "docs.jsonl.zst"), zstd_frames(jsonl))
    write(os.path.join(out, "docs.txt.gz"), gzip.compress(as_text(texts)))
    write(os.path.join(out, "docs.txt.zst"), zstandard.ZstdCompressor().compress(as_text(texts)))
    write(os.path.join(out, "gzip_named.txt"), gzip.compress(as_text(texts)))
    write_parquet(os.path.join(out, "snappy_string.parquet"), texts, "snappy", padded=True)
    write_parquet(os.path.join(out, "zstd_large_string.parquet"), texts, "zstd", "large_string")
    write_parquet(os.path.join(out, "gzip_dictionary.parquet"), texts, "gzip", "dictionary")
    write_parquet(os.path.join(out, "none_string_view.parquet"), texts, "none", "string_view")
    write_parquet(os.path.join(out, "body_column.parquet"), texts, "snappy", column="body")

    third = len(texts) // 3
    write(os.path.join(out, "mixed", "a_first.txt.gz"), gzip.compress(as_text(texts[:third])))
    write(os.path.join(out, "mixed", "b_second.jsonl"), as_jsonl(texts[third:2 * third]))
    write_parquet(os.path.join(out, "mixed", "c_third.parquet"), texts[2 * third:], "zstd")
    write(os.path.join(out, "mixed", "README.md"), b"# not corpus text\n")
    write(os.path.join(out, "mixed", ".hidden.txt"), b"not corpus text either\n")

    gz, zst = gzip.compress(jsonl), zstd_frames(jsonl)
    write(os.path.join(out, "truncated.jsonl.gz"), gz[: len(gz) * 6 // 10])
    write(os.path.join(out, "truncated.jsonl.zst"), zst[: len(zst) * 6 // 10])
    write(os.path.join(out, "corrupt.jsonl.gz"), gz[:-8] + bytes([gz[-8] ^ 0x01]) + gz[-7:])
    write(os.path.join(out, "corrupt.jsonl.zst"), zst[:-4] + bytes([zst[-4] ^ 0x01]) + zst[-3:])

    checked = os.path.join(out, "checked.parquet")
    write_parquet(checked, texts, "snappy", write_page_checksum=True, use_dictionary=False)
    data = open(checked, "rb").read()
    os.remove(checked)
    write(os.path.join(out, "truncated.parquet"), data[: len(data) * 6 // 10])
    chunk = pq.ParquetFile(io_bytes(data)).metadata.row_group(1).column(1)
    at = chunk.data_page_offset + chunk.total_compressed_size - 10  # inside the data page's payload (no dictionary)
    write(os.path.join(out, "corrupt.parquet"), data[:at] + bytes([data[at] ^ 0xFF]) + data[at + 1:])

    bad = pa.Array.from_buffers(pa.string(), 2, [None, pa.py_buffer(bytes([0, 0, 0, 0, 2, 0, 0, 0, 6, 0, 0, 0])),
                                                 pa.py_buffer(b"okab\xffc")])
    pq.write_table(pa.table({"text": bad}), os.path.join(out, "bad_utf8.parquet"))
    write(os.path.join(out, "not_gzip.txt.gz"), as_text(texts[:2]))
    write(os.path.join(out, "not_parquet.parquet"), as_text(texts[:2]))
    print(f"{len(texts)} documents")


def io_bytes(data):
    return pa.BufferReader(data)


if __name__ == "__main__":
    main()
