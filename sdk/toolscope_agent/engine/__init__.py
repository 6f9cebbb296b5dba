"""Pure functions shared by the server and the agent: same inputs, same answers, no I/O."""
