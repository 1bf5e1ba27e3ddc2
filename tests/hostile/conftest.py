"""Hostile and careless inputs (issue 18): model files, caches, server requests, huge sizes and odd values, each a
regression test for a defect that was reproduced. Long variants are marked `slow` (run with `-m slow`)."""
