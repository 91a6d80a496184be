"""The decode step's latency timed from the trace itself (:mod:`.timing`), for captures the
workbench did not time. The steps and layers inferred from the kernel stream are the trace
layer's (:mod:`workbench.trace.inferred`): an import puts them in a trace as ranges."""
