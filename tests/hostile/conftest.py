"""Hostile and careless inputs (issue 18): model files, caches, server requests, huge sizes and odd values, each a
regression test for a defect that was reproduced. Long variants are marked `slow` (run with `-m slow`)."""
import os, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))   # _hostile_files.py: builders of valid and crafted files
