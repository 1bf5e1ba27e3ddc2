# NVIDIA structural checks without a GPU (plugins/nv/tests/test_nv_gemm.py): cuobjdump and the nvdisasm it runs, from
# NVIDIA's CUDA 13 wheels (~60 MB; the toolkit on this machine has ptxas and NVRTC but not these)
step "optional: cuobjdump + nvdisasm (CUDA 13 wheels) for the SASS checks of the NV plugin's kernels"
pip install "nvidia-cuda-cuobjdump>=13,<14" "nvidia-cuda-nvdisasm>=13,<14" || echo "setup: cuobjdump/nvdisasm wheels unavailable: the SASS test skips with the reason"
