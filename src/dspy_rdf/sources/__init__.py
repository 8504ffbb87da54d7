"""Readers of the DSPy shapes other than DSPy 3.3 typed JSON; each turns one shape into the canonical model."""
