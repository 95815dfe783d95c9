"""`gpuscale infer` with SGLang's default memory fraction: a launch it leaves without KV room is
refused in one line (exit 2) naming the fraction and how to state the launch's own."""

from __future__ import annotations

H100_DEP16 = (
    "infer", "deepseek-r1", "--gpu", "h100-sxm", "--engine", "sglang", "--input", "1024",
    "--output", "1024", "--concurrency", "64", "--prefill-workers", "1", "--prefill-tp", "16",
    "--decode-workers", "1", "--decode-tp", "16", "--decode-ep", "16",
    "--decode-attention-dp", "16", "--speculative", "mtp", "--draft-tokens", "2",
)  # fmt: skip


def test_default_fraction_without_kv_room_exits_2_with_one_line(gpuscale) -> None:
    proc = gpuscale(*H100_DEP16)
    assert proc.returncode == 2 and not proc.stdout
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr
    assert "default mem_fraction_static (0.328" in lines[0]
    assert "--engine-options memory_fraction=F" in lines[0]


def test_stated_fraction_without_kv_room_exits_2_with_one_line(gpuscale) -> None:
    proc = gpuscale(
        "infer", "llama3.1-70b", "--gpu", "h100-sxm", "--engine", "sglang", "--tp", "2",
        "--concurrency", "4", "--engine-options", "memory_fraction=0.01",
    )  # fmt: skip
    assert proc.returncode == 2 and not proc.stdout
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr
    assert "memory_fraction=0.01 leaves the engine room for 0 KV tokens" in lines[0]
