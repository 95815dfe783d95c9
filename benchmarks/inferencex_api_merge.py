"""Merge the transcribed parts of InferenceX's API snapshot into the held-out serving CSV.

    PYTHONPATH=src python benchmarks/inferencex_api_merge.py PART.csv [PART.csv ...] \
        [-o data/validation/serving/inferencex_api_dsr1.csv]

Identical records (every field but ``page_offset``) are kept once
(``gpuscale.validation.inferencex_api.dedupe``), ordered by where they start in the JSON file.
Prints the record counts. The CSV in the repository is the data; this only regenerates it.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from gpuscale.validation import DATA_DIR
from gpuscale.validation.inferencex_api import API_FILE, load_records, merge_parts, write_records


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("parts", nargs="+", type=Path)
    ap.add_argument("-o", "--out", type=Path, default=DATA_DIR / "serving" / API_FILE)
    args = ap.parse_args()
    total = sum(len(load_records(p)) for p in args.parts)
    merged = merge_parts(args.parts)
    write_records(merged, args.out)
    print(f"{total} records in {len(args.parts)} parts, {len(merged)} distinct -> {args.out}")


if __name__ == "__main__":
    main()
