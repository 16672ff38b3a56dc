"""What a user hands in, parsed without torch: tables, Prometheus samples, speculative vectors
and plan logs, the inputs of ``tune`` and kernel measurement files."""
