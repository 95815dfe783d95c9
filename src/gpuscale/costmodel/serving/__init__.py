"""Serving cost model: weight formats, KV-cache sizing and the time of one engine iteration."""
