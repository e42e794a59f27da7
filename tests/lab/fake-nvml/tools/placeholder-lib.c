/*
 * A placeholder driver library of the lab's simulated driver: an ELF shared
 * object with the soname of the library it stands for (libcuda.so.1) and no
 * functions. gpuops-fake-driver installs it as libcuda.so.VERSION, the file
 * nvidia-ctk looks for to find the driver's library directory and version;
 * nothing in the lab runs CUDA.
 */
__attribute__((visibility("default"))) const char gpuopsLabPlaceholderLibrary[] =
    "gpuops.nvidia lab placeholder: no CUDA driver in here";
