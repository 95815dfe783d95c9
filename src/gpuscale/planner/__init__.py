"""Search over parallel plans: enumerate, price with the cost model, rank, scale, recommend.

Everything here is pure and vectorized over candidates; the CLI only parses and renders.
"""
