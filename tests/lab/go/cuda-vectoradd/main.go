// Command vectorAdd is the gpuops lab's STAND-IN for NVIDIA's CUDA sample vectorAdd, the program
// of the image nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.0-ubuntu22.04. It is not
// NVIDIA's program and runs no CUDA: the lab has no GPU and no CUDA driver (libcuda), only a fake
// NVML, NVIDIA's management library.
//
// What the real sample does (NVIDIA/cuda-samples, Samples/0_Introduction/vectorAdd/vectorAdd.cu;
// NVIDIA/k8s-samples deployments/container/Dockerfile.ubuntu, as of commit 6a58730 "Use
// ubuntu22.04 base images", builds it from the cuda-samples tag v11.6 on
// nvidia/cuda:12.5.0-base-ubuntu22.04 into /cuda-samples/vectorAdd, with
// ENTRYPOINT ["/cuda-samples/sample"], a link to it): it prints "[Vector addition of 50000
// elements]", fills two host vectors of 50000 floats with rand()/RAND_MAX, allocates three device
// vectors with cudaMalloc, copies the inputs to the device, launches a kernel C[i] = A[i] + B[i]
// on 196 blocks of 256 threads, copies the result back, checks every element to within 1e-5 and
// prints "Test PASSED", frees the vectors and prints "Done". When a CUDA call fails it prints
// "Failed to <step> (error code <cudaGetErrorString>)!" on stderr and exits with EXIT_FAILURE (1);
// in a container the NVIDIA runtime gave no GPU, the first call (cudaMalloc of vector A) fails
// with cudaErrorNoDevice: "Failed to allocate device vector A (error code no CUDA-capable device
// is detected)!".
//
// What this program does instead: it takes the GPU device nodes the NVIDIA runtime injected into
// the container, /dev/nvidiaN (N a number; a character device, or the regular file the lab's fake
// driver writes where it cannot mknod), as the CUDA devices. With none it fails as the sample
// does; with one or more it does the sample's steps in host memory: two vectors of 50000
// pseudo-random floats in [0, 1) from a fixed seed (the sample never seeds rand() either; the
// numbers differ), "device" vectors that are host copies, the addition over the same grid
// (element blockDim*blockIdx+threadIdx of 196 blocks of 256 threads), the same check, the same
// lines on stdout and stderr and the same exit status. So a pass says that the runtime gave the container
// a GPU's device node, as the lab's other checks see it; it says nothing about CUDA or compute.
//
// GPUOPS_LAB_DEVICE_DIR (default /dev) is where it looks for the device nodes: for the lab's
// tests of this program outside a container only.
package main

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
)

const (
	numElements     = 50000
	threadsPerBlock = 256
	// cudaGetErrorString(cudaErrorNoDevice)
	errNoDevice = "no CUDA-capable device is detected"
)

var gpuNode = regexp.MustCompile(`^nvidia[0-9]+$`)

// cudaDevices counts the GPU device nodes in DIR: /dev/nvidiaN, character devices or (the lab's
// fake driver without mknod) regular files; links are followed.
func cudaDevices(dir string) int {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0
	}
	n := 0
	for _, e := range entries {
		if !gpuNode.MatchString(e.Name()) {
			continue
		}
		st, err := os.Stat(filepath.Join(dir, e.Name()))
		if err != nil {
			continue
		}
		if m := st.Mode(); m.IsRegular() || m&os.ModeCharDevice != 0 {
			n++
		}
	}
	return n
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
	os.Exit(1)
}

// vectorAdd is the sample's kernel, one call per thread of the grid.
func vectorAdd(blockDim, blockIdx, threadIdx int, a, b, c []float32, n int) {
	if i := blockDim*blockIdx + threadIdx; i < n {
		c[i] = a[i] + b[i]
	}
}

func main() {
	fmt.Printf("[Vector addition of %d elements]\n", numElements)

	hA := make([]float32, numElements)
	hB := make([]float32, numElements)
	hC := make([]float32, numElements)
	// the sample's rand() is never seeded: the same inputs on every run, as here
	rng := rand.New(rand.NewPCG(1, 1))
	for i := range numElements {
		hA[i] = rng.Float32()
		hB[i] = rng.Float32()
	}

	dir := os.Getenv("GPUOPS_LAB_DEVICE_DIR")
	if dir == "" {
		dir = "/dev"
	}
	if cudaDevices(dir) == 0 {
		fail("Failed to allocate device vector A (error code %s)!", errNoDevice)
	}
	dA := make([]float32, numElements)
	dB := make([]float32, numElements)
	dC := make([]float32, numElements)

	fmt.Println("Copy input data from the host memory to the CUDA device")
	copy(dA, hA)
	copy(dB, hB)

	blocksPerGrid := (numElements + threadsPerBlock - 1) / threadsPerBlock
	fmt.Printf("CUDA kernel launch with %d blocks of %d threads\n", blocksPerGrid, threadsPerBlock)
	for block := range blocksPerGrid {
		for thread := range threadsPerBlock {
			vectorAdd(threadsPerBlock, block, thread, dA, dB, dC, numElements)
		}
	}

	fmt.Println("Copy output data from the CUDA device to the host memory")
	copy(hC, dC)

	for i := range numElements {
		if math.Abs(float64(hA[i]+hB[i]-hC[i])) > 1e-5 {
			fail("Result verification failed at element %d!", i)
		}
	}
	fmt.Println("Test PASSED")
	fmt.Println("Done")
}
