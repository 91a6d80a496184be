"""Steps and layers inferred from the kernel stream, for traces whose program had no ranges to
give (an engine nobody can instrument): :mod:`.structure` finds them (tokens: :mod:`.names`;
periods: :mod:`.periods`), :mod:`.ranges` puts them in a trace as ranges labelled inferred."""
