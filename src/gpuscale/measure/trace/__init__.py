"""Why is my job slow? Analysis of PyTorch profiler traces, one file per rank.

A facade over small analyzers (the shape of HTA's ``TraceAnalysis``)::

    reader       stream events out of .json / .json.gz (ijson, bounded memory)
    classify     compute, communication, data loader, optimizer, step markers
    timeline     one pass: unions of busy time per kind, step windows, collective calls
    breakdown    per step: compute, optimizer, exposed comm, data wait, idle; overlap
    collectives  per (op, size): mean, p99, CV of the transfer time across ranks
    skew         the straggler rank and by how much
    diagnose     rules with evidence and the next thing to try
    predict      measured against ``gpuscale estimate``'s prediction

Ranks are read in parallel processes; nothing here imports torch.
"""

from __future__ import annotations

from gpuscale.measure.trace.analysis import TraceReport, analyze
from gpuscale.measure.trace.diagnose import Diagnosis, Thresholds
from gpuscale.measure.trace.predict import Prediction, load_prediction, prediction_from_document

__all__ = [
    "Diagnosis",
    "Prediction",
    "Thresholds",
    "TraceReport",
    "analyze",
    "load_prediction",
    "prediction_from_document",
]
