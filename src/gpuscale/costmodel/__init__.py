"""The pure cost model: memory, FLOPs, collectives on a topology, step time.

No I/O, no printing, no torch. Functions take the specs they read and, where the planner needs it,
a :class:`~gpuscale.specs.PlanBatch` of many plans at once.
"""
