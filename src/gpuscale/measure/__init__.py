"""Measure the real machine: collective and matmul benchmarks, nccl-tests import, calibration,
and a health check.

Parsing and fitting are pure Python (numpy only); everything that runs ``torch`` imports it inside
the function that needs it, so ``gpuscale import nccl-tests`` and ``gpuscale calibrate --from``
work on a machine without torch.
"""
