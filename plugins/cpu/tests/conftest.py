import os, sys
sys.path.insert(0, os.path.dirname(__file__))   # _cpu_memcheck.py (the memory-check tests' programs), _c_library.py
