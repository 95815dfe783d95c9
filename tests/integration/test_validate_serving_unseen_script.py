"""benchmarks/validate_serving_unseen.py: the held-out InferenceX DeepSeek-R1 figures quoted in
docs/benchmarks.md, and the counts that add up to the records."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from gpuscale.validation import DATA_DIR
from gpuscale.validation.inferencex_api import API_FILE, load_records, write_records
from tests.benchmark_scripts import run_benchmark

COMPARISONS = (
    "ttft_vs_mean",
    "ttft_vs_median",
    "ttft_p50_vs_median",
    "tpot_vs_mean",
    "tpot_vs_median",
    "output_tps_vs_measured",
)


def test_json_counts_add_up_and_groups_have_every_comparison() -> None:
    # Every 6th measurement (``--limit``): the whole set takes ~70 s, a sixth keeps every
    # hardware, engine and mode group and the counts' identities at a sixth of the suite time
    # (about 250 predictions, as every 4th did before the multi-node MTP records became
    # expressible).
    out = run_benchmark("validate_serving_unseen", "--json", "--by", "spec", "--limit", "250")
    assert out.returncode == 0, out.stderr
    res = json.loads(out.stdout)
    assert res["records"] == len(load_records(DATA_DIR / "serving" / API_FILE))
    assert res["source"]["commit"] == "3a600f1d9ce155536d52e2f58f744f27a301aac9"
    assert res["measurements"] <= res["records"]
    # Every measurement is predicted, refused by infer, or not expressible with a reason.
    refused = sum(res["refused_by_infer"].values())
    assert res["measurements"] == res["expressible"] + sum(res["not_expressible"].values())
    assert res["predicted"] == res["expressible"] - refused > 0
    assert all(k.startswith("infer refused: ") for k in res["refused_by_infer"])
    groups = res["groups"]
    assert groups["all|all|all"]["n"] == res["predicted"]
    assert groups["all|all|agg"]["n"] + groups["all|all|disagg"]["n"] == res["predicted"]
    per_hem = [
        g
        for k, g in groups.items()
        if k.count("|") == 2 and "all" not in k.split("|") and not k.startswith("hopper")
    ]
    assert sum(g["n"] for g in per_hem) == res["predicted"]
    for g in groups.values():
        for c in COMPARISONS:
            s = g[c]
            if s is None:
                # Only throughput can lack a figure (records of 2025-10-06).
                assert c == "output_tps_vs_measured"
                continue
            assert s["mean_abs_pct"] >= 0 and s["median_abs_pct"] >= 0
            # |median(e)| <= median(|e|) (half the errors reach the median), to the rounding.
            assert abs(s["median_bias_pct"]) <= s["median_abs_pct"] + 0.15
            assert 0 < s["n"] <= g["n"]
    # --by spec splits each hardware x engine x mode by spec-decoding, and only those.
    split = [k for k in groups if k.count("|") == 3]
    assert split and all(k.split("|")[3] in ("spec=none", "spec=mtp") for k in split)
    # H100/H200: seen (in the project's data) or unseen, and each counted once.
    hopper = sum(groups.get(f"{h}|all|all", {"n": 0})["n"] for h in ("h100", "h200"))
    seen = res["hopper_seen"]
    assert seen.get("seen", 0) + seen.get("unseen", 0) == hopper
    assert seen.get("seen_identical_measurement", 0) <= seen.get("seen", 0)
    tagged = sum(groups.get(f"hopper-{t}|all|all", {"n": 0})["n"] for t in ("seen", "unseen"))
    assert tagged == hopper
    assert groups["not-hopper|all|all"]["n"] == res["predicted"] - hopper


def test_text_table_rows_csv_and_bad_key(tmp_path: Path) -> None:
    rows_csv = tmp_path / "rows.csv"
    out = run_benchmark("validate_serving_unseen", "--limit", "60", "--rows-csv", str(rows_csv))
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith("records: ")
    assert any(line.split()[:3] == ["all", "all", "all"] for line in lines)
    assert "not expressible:" in lines
    with rows_csv.open() as f:
        rows = list(csv.DictReader(f))
    measured = int(lines[0].split("measurements: ")[1].split(",")[0])
    assert len(rows) == measured
    kinds = {r["kind"] for r in rows}
    assert "expressible" in kinds and "not expressible" in kinds
    for r in rows:
        # A prediction exactly where the record was predicted; a reason everywhere else.
        assert (r["model_ttft_ms"] != "") == (r["kind"] == "expressible"), r
        assert (r["reason"] == "") == (r["kind"] == "expressible"), r
        assert float(r["ttft_ms_p50"]) <= float(r["ttft_ms_p99"]) * 1.001
    bad = run_benchmark("validate_serving_unseen", "--by", "colour")
    assert bad.returncode == 2
    assert "unknown --by key colour" in bad.stderr and "Traceback" not in bad.stderr


def test_merge_script_regenerates_the_csv_from_parts(tmp_path: Path) -> None:
    records = load_records(DATA_DIR / "serving" / API_FILE)
    # Split where a page starts (a page's records are one transcriber's, in page order).
    half = next(
        i
        for i in range(len(records) // 2, len(records))
        if records[i]["page_offset"] != records[i - 1]["page_offset"]
    )
    one, two, out = tmp_path / "part1.csv", tmp_path / "part2.csv", tmp_path / "merged.csv"
    # Two parts given in the wrong order, one record copied twice: the merge is the data.
    write_records(records[half:], one)
    write_records([*records[:half], records[0]], two)
    res = run_benchmark("inferencex_api_merge", str(one), str(two), "-o", str(out))
    assert res.returncode == 0, res.stderr
    assert f"{len(records) + 1} records in 2 parts, {len(records)} distinct" in res.stdout
    assert out.read_text() == (DATA_DIR / "serving" / API_FILE).read_text()
