"""Parameter counts of the catalog models, computed from their shapes in ``models.yaml``.

Prints total and per-token active parameters (billions) of every catalog model, with the active
count also without the input embedding and without both embedding tables, the three ways
publishers state "active" (tests/unit/test_catalog_model_params.py pins each model against its
publisher's figure and convention).

    PYTHONPATH=src python benchmarks/catalog_params.py [--moe]
"""

from __future__ import annotations

import argparse

from gpuscale import catalog
from gpuscale.costmodel.params import active_params, embedding_params, total_params


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--moe", action="store_true", help="only mixture-of-experts models")
    args = parser.parse_args()
    print(f"{'model':<20} {'total B':>9} {'active B':>9} {'no lookup':>9} {'non-emb':>9}  layout")
    for mid, m in catalog.models().items():
        if args.moe and not m.is_moe:
            continue
        active = active_params(m)
        lookup = m.vocab_size * m.hidden_size
        layout = []
        if m.is_mla:
            layout.append("MLA")
        if m.sparse_attention_topk:
            layout.append(f"DSA top-{m.sparse_attention_topk}")
        if m.linear_attention_layers:
            layout.append(f"{m.linear_attention_layers} Gated DeltaNet layers")
        if m.sliding_window_layers:
            layout.append(f"{m.sliding_window_layers} window-{m.sliding_window} layers")
        if m.is_moe:
            layout.append(f"{m.num_experts} experts top-{m.experts_per_token}")
        print(
            f"{mid:<20} {total_params(m) / 1e9:>9.2f} {active / 1e9:>9.2f} "
            f"{(active - lookup) / 1e9:>9.2f} {(active - embedding_params(m)) / 1e9:>9.2f}  "
            + ", ".join(layout)
        )


if __name__ == "__main__":
    main()
