"""tinycore-opencl: the CL device (tinygrad's old name GPU is an alias) over pyopencl and any OpenCL ICD."""
