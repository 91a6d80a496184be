"""Steps, layers and timing inferred from the kernel stream, for traces whose program had no
ranges to give (an engine nobody can instrument): :mod:`.structure` finds them, :mod:`.ranges`
puts them in a trace as ranges labelled inferred, :mod:`.timing` times steps from the trace."""
