"""Everything that touches torch: device resolution, the timer, the kernel suite, the
roofline store, model profiles. Profilers return measurement dataclasses and never print;
progress is reported through a callback the CLI wires to a progress bar."""
