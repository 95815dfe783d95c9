"""The names the cluster commands accept, apart from the modules that act on them, so that the
command line can list them without loading the simulator (every ``gpuscale`` command builds its
flags from :data:`gpuscale.api.params.PARAMS`)."""

from __future__ import annotations

POLICIES: tuple[str, ...] = ("first-fit", "random", "topology")
"""Placement policies (:func:`gpuscale.cluster.placement.make_policy`)."""

ORDERS: tuple[str, ...] = ("fifo", "sjf", "las")
"""Queue orders. ``las``: discretized two-dimensional least attained service (Gu et al.,
"Tiresias", NSDI 2019, Sec. 4.1) with two queues, as the Pollux artifact's Tiresias baseline
runs it (``simulator/tiresias.py``): new jobs join queue 0, a job whose attained service (GPUs x
run time) reaches ``las_threshold_gpu_s`` moves to the end of queue 1; at every event the jobs
are walked queue 0 then queue 1, each in order, and run while their GPUs fit in the cluster's
(jobs that do not fit are skipped, not waited for); a running job left out is preempted and
resumes later from where it stopped, paying ``preempt_restart_s``."""

EVENTS: tuple[str, ...] = ("inter", "intra", "node-loss")
"""What happens to a running job (:func:`gpuscale.cluster.adapt.adapt`)."""

SYNTHETIC: tuple[str, ...] = ("philly",)
"""Published clusters a synthetic trace can mimic (:mod:`gpuscale.cluster.trace`)."""

DEFAULT_MODEL = "bert-large"
"""Model assumed for trace rows that name none (Philly's 2017 jobs were CNNs, LSTMs and early
Transformers of 10^7-10^8 parameters, Jeon et al. ATC'19 Sec. 2; BERT-large, 340M, is the
nearest catalog model, and the Pollux/Sia placement tables include BERT)."""
