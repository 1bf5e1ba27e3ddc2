import os, sys
sys.path.insert(0, os.path.dirname(__file__))   # _cpu_memcheck.py, the programs the memory-check tests run
