"""Where jobs go on a shared cluster: the cluster file, placement policies, the cost model's
slowdown of each allocation, traces, and a discrete-event simulator (DESIGN.md, "place")."""
