"""Cross-checking: every path against the reference, on the zoo and on random graphs."""
