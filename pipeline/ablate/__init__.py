"""Ablations: one traced corpus, several data formats, the same model trained and scored on each."""
