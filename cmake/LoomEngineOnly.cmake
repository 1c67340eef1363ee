# LOOM_ENGINE_ONLY: engine/device, the CPU kernels (engine/train's CpuKernels, the Llama kernels, GELU, the
# vocab softmax, AdamW with its FlatValues) and loom-device-check. OpenBLAS and nlohmann_json's headers come
# from the system or from LOOM_CARRY_DIR, Debian packages unpacked by tests/gpu/carry.sh for a machine that
# has neither.
# The device parts need the CUDA toolkit (nvcc, cudart, cuBLAS), not NCCL, which a machine may have only
# inside PyTorch's wheels: engine/device is built whenever the toolkit is there.
if(NOT CMAKE_CUDA_COMPILER OR NOT CUDAToolkit_FOUND)
  message(FATAL_ERROR "LOOM_ENGINE_ONLY builds the CUDA device check, but the CUDA parts are ${LOOM_HAVE_CUDA_TEXT}")
endif()
set(LOOM_HAVE_CUDA ON)
set(LOOM_CARRY_DIR "${PROJECT_SOURCE_DIR}/build/gpu-carry" CACHE PATH "Unpacked Debian packages (tests/gpu/carry.sh)")
find_package(Threads REQUIRED)
find_path(LOOM_CBLAS_INCLUDE cblas.h
  HINTS ${LOOM_CARRY_DIR}/usr/include/x86_64-linux-gnu/openblas-pthread /usr/include/x86_64-linux-gnu/openblas-pthread)
find_library(LOOM_OPENBLAS NAMES openblas
  HINTS ${LOOM_CARRY_DIR}/usr/lib/x86_64-linux-gnu/openblas-pthread /usr/lib/x86_64-linux-gnu/openblas-pthread)
find_path(LOOM_JSON_INCLUDE nlohmann/json_fwd.hpp HINTS ${LOOM_CARRY_DIR}/usr/include)
if(NOT LOOM_CBLAS_INCLUDE OR NOT LOOM_OPENBLAS OR NOT LOOM_JSON_INCLUDE)
  message(FATAL_ERROR "LOOM_ENGINE_ONLY needs OpenBLAS and nlohmann_json's headers: install them, or unpack them "
                      "into ${LOOM_CARRY_DIR} with tests/gpu/carry.sh (found: ${LOOM_CBLAS_INCLUDE}, ${LOOM_OPENBLAS}, "
                      "${LOOM_JSON_INCLUDE})")
endif()

add_subdirectory(engine/device)

set(train ${PROJECT_SOURCE_DIR}/engine/train)
add_library(loom_cpu_kernels STATIC ${train}/CpuKernels.cpp ${train}/LlamaKernels.cpp ${train}/Gelu.cpp
                                    ${train}/Threads.cpp ${train}/VocabSoftmax.cpp ${train}/Optimizer.cpp
                                    ${train}/Parameters.cpp)
target_include_directories(loom_cpu_kernels PUBLIC ${PROJECT_SOURCE_DIR} ${LOOM_JSON_INCLUDE}
                                            PRIVATE ${LOOM_CBLAS_INCLUDE})
# Parameters.cpp: AdamW keeps its moments in FlatValues on a device (the host's CpuDevice, loom_device).
target_link_libraries(loom_cpu_kernels PUBLIC ${LOOM_OPENBLAS} Threads::Threads loom_device)
# The same flags as engine/train/CMakeLists.txt gives these files, so the numbers compared are the CPU run's.
set_source_files_properties(${train}/CpuKernels.cpp ${train}/LlamaKernels.cpp PROPERTIES COMPILE_OPTIONS "-O3")
set_source_files_properties(${train}/Gelu.cpp PROPERTIES COMPILE_OPTIONS "-O3;-ffast-math")
set_source_files_properties(${train}/Optimizer.cpp PROPERTIES COMPILE_OPTIONS "-O3;-fno-math-errno;-ffp-contract=off")

set(tools ${PROJECT_SOURCE_DIR}/engine/tools)
add_executable(loom-device-check ${tools}/DeviceCheck.cpp ${tools}/DeviceCheckCases.cpp ${tools}/DeviceCheckMemory.cpp
                                 ${tools}/DeviceBench.cpp ${tools}/DeviceStepBench.cpp)
target_link_libraries(loom-device-check PRIVATE loom_device_cuda loom_cpu_kernels)
message(STATUS "Loom ${PROJECT_VERSION}, engine only: nvcc ${CMAKE_CUDA_COMPILER_VERSION}, OpenBLAS ${LOOM_OPENBLAS}")
