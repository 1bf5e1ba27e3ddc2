import os, sys
sys.path.insert(0, os.path.dirname(__file__))   # _amd_tools.py, the renderer and ISA-run helpers the tests share
