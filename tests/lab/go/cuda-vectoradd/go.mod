module gpuops.lab/cuda-vectoradd

go 1.26.0
