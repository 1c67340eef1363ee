#include "engine/device/CudaKernels.h"

#include "engine/device/CudaKernelsScratch.h"
#include "engine/device/CudaLaunch.h"

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstring>
#include <string>

namespace loom::device {

namespace {

constexpr std::size_t kWorkspaceBytes = 32u << 20; // cuBLASLt's Hopper kernels want up to 32 MiB

void checkBlas(cublasStatus_t status, const Device& device, const char* call)
{
    if (status != CUBLAS_STATUS_SUCCESS)
        throw DeviceError(device.name() + ": " + call + " failed: " + cublasGetStatusName(status) + " ("
            + cublasGetStatusString(status) + ")");
}

void checkLaunch(const Device& device, const char* kernel)
{
    checkCuda(cudaGetLastError(), device.name(), kernel);
}

cublasComputeType_t batchedComputeType(GemmPrecision p)
{
    switch (p) {
    case GemmPrecision::Bf16:
        return CUBLAS_COMPUTE_32F_FAST_16BF;
    case GemmPrecision::Fp16:
        return CUBLAS_COMPUTE_32F_FAST_16F;
    case GemmPrecision::Fp32:
        break;
    }
    return CUBLAS_COMPUTE_32F;
}

// A cuBLASLt descriptor owned for one call.
template <class T, cublasStatus_t (*Destroy)(T)> struct LtHandle {
    T handle = nullptr;
    ~LtHandle()
    {
        if (handle)
            Destroy(handle);
    }
};
using MatmulDesc = LtHandle<cublasLtMatmulDesc_t, cublasLtMatmulDescDestroy>;
using Layout = LtHandle<cublasLtMatrixLayout_t, cublasLtMatrixLayoutDestroy>;
using Preference = LtHandle<cublasLtMatmulPreference_t, cublasLtMatmulPreferenceDestroy>;

} // namespace

const char* gemmPrecisionName(GemmPrecision p)
{
    switch (p) {
    case GemmPrecision::Bf16:
        return "bf16";
    case GemmPrecision::Fp16:
        return "fp16";
    case GemmPrecision::Fp32:
        break;
    }
    return "fp32";
}

CudaKernels::CudaKernels(Device& device, GemmPrecision precision, Stream stream)
    : m_device(device)
    , m_precision(precision)
    , m_stream(stream)
    , m_scratch(std::make_unique<Scratch>())
{
    if (device.kind() != DeviceKind::Cuda)
        throw DeviceError("CudaKernels need a CUDA device, not " + device.name());
    cublasHandle_t blas = nullptr;
    checkBlas(cublasCreate(&blas), device, "cublasCreate");
    m_blas = blas;
    try { // a constructor that throws runs no destructor: release the handles here
        checkBlas(cublasSetStream(blas, static_cast<cudaStream_t>(stream.handle)), device, "cublasSetStream");
        // Strict fp32 unless 16-bit products were asked for: TF32 would break the 1e-5 agreement with the CPU.
        checkBlas(cublasSetMathMode(blas, CUBLAS_DEFAULT_MATH), device, "cublasSetMathMode");
        cublasLtHandle_t lt = nullptr;
        checkBlas(cublasLtCreate(&lt), device, "cublasLtCreate");
        m_blasLt = lt;
        Scratch::atLeast(m_scratch->workspace, device, kWorkspaceBytes);
    } catch (...) {
        if (m_blasLt)
            cublasLtDestroy(static_cast<cublasLtHandle_t>(m_blasLt));
        cublasDestroy(blas);
        throw;
    }
}

CudaKernels::~CudaKernels()
{
    if (m_blasLt)
        cublasLtDestroy(static_cast<cublasLtHandle_t>(m_blasLt));
    if (m_blas)
        cublasDestroy(static_cast<cublasHandle_t>(m_blas));
}

std::uint16_t* CudaKernels::half(int which, const float* in, std::size_t n)
{
    std::uint16_t* out = Scratch::atLeast(m_scratch->half[which], m_device, n);
    if (m_precision == GemmPrecision::Bf16)
        launchToBf16(out, in, n, m_stream.handle);
    else
        launchToFp16(out, in, n, m_stream.handle);
    checkLaunch(m_device, "16-bit rounding kernel");
    return out;
}

void CudaKernels::gemm(
    bool transA, bool transB, int M, int N, int K, const float* A, const float* B, float* C, bool accumulate)
{
    if (M == 0 || N == 0)
        return;
    if (K == 0) {
        if (!accumulate)
            m_device.fillFloats(C, 0.0f, std::size_t(M) * N, m_stream);
        return;
    }
    matmul(transA, transB, M, N, K, A, B, C, accumulate ? 1.0f : 0.0f, Epilogue::None, nullptr, nullptr);
}

void CudaKernels::gemmEpilogue(bool transA, bool transB, int M, int N, int K, const float* A, const float* B, float* C,
    Epilogue epilogue, const float* bias, float* aux)
{
    if (M == 0 || N == 0 || K == 0)
        throw DeviceError(m_device.name() + ": gemmEpilogue of an empty product");
    matmul(transA, transB, M, N, K, A, B, C, 0.0f, epilogue, bias, aux);
}

// Row-major C[M×N] = op(A)·op(B) is column-major Cᵀ[N×M] = op(B)ᵀ·op(A)ᵀ: cuBLASLt's first operand is our
// B, its second our A, each read in place (a row-major K×N matrix is a column-major N×K one).
void CudaKernels::matmul(bool transA, bool transB, int M, int N, int K, const float* A, const float* B, float* C,
    float beta, Epilogue epilogue, const float* bias, float* aux)
{
    const bool sixteen = m_precision != GemmPrecision::Fp32;
    const cudaDataType_t in = !sixteen ? CUDA_R_32F : (m_precision == GemmPrecision::Bf16 ? CUDA_R_16BF : CUDA_R_16F);
    const void* a = sixteen ? static_cast<const void*>(half(0, A, std::size_t(M) * K)) : A;
    const void* b = sixteen ? static_cast<const void*>(half(1, B, std::size_t(K) * N)) : B;

    MatmulDesc desc;
    checkBlas(cublasLtMatmulDescCreate(&desc.handle, CUBLAS_COMPUTE_32F, CUDA_R_32F), m_device, "MatmulDescCreate");
    const cublasOperation_t opFirst = transB ? CUBLAS_OP_T : CUBLAS_OP_N, opSecond = transA ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasLtMatmulDescSetAttribute(desc.handle, CUBLASLT_MATMUL_DESC_TRANSA, &opFirst, sizeof opFirst);
    cublasLtMatmulDescSetAttribute(desc.handle, CUBLASLT_MATMUL_DESC_TRANSB, &opSecond, sizeof opSecond);
    if (epilogue != Epilogue::None) {
        const cublasLtEpilogue_t e = epilogue == Epilogue::Bias
            ? CUBLASLT_EPILOGUE_BIAS
            : (aux ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_GELU_BIAS);
        cublasLtMatmulDescSetAttribute(desc.handle, CUBLASLT_MATMUL_DESC_EPILOGUE, &e, sizeof e);
        cublasLtMatmulDescSetAttribute(desc.handle, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias);
        if (aux) {
            const std::int64_t ld = N;
            cublasLtMatmulDescSetAttribute(desc.handle, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof aux);
            cublasLtMatmulDescSetAttribute(desc.handle, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ld, sizeof ld);
        }
    }
    Layout first, second, out;
    checkBlas(cublasLtMatrixLayoutCreate(&first.handle, in, transB ? K : N, transB ? N : K, transB ? K : N), m_device,
        "MatrixLayoutCreate");
    checkBlas(cublasLtMatrixLayoutCreate(&second.handle, in, transA ? M : K, transA ? K : M, transA ? M : K), m_device,
        "MatrixLayoutCreate");
    checkBlas(cublasLtMatrixLayoutCreate(&out.handle, CUDA_R_32F, N, M, N), m_device, "MatrixLayoutCreate");

    const std::size_t workspace = m_scratch->workspace.bytes();
    const auto lt = static_cast<cublasLtHandle_t>(m_blasLt);
    auto alignment = [](const void* p) { return static_cast<long long>(reinterpret_cast<std::uintptr_t>(p) % 16); };
    const Scratch::GemmKey key { transA, transB, M, N, K, static_cast<long long>(epilogue), aux != nullptr,
        beta != 0.0f, alignment(a) * 256 + alignment(b) * 16 + alignment(C) };
    cublasLtMatmulAlgo_t algo {};
    static_assert(sizeof algo == sizeof(Scratch::algorithms.begin()->second));
    if (auto known = m_scratch->algorithms.find(key); known != m_scratch->algorithms.end()) {
        std::memcpy(&algo, known->second.data(), sizeof algo);
    } else {
        Preference pref;
        checkBlas(cublasLtMatmulPreferenceCreate(&pref.handle), m_device, "MatmulPreferenceCreate");
        cublasLtMatmulPreferenceSetAttribute(
            pref.handle, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace, sizeof workspace);
        cublasLtMatmulHeuristicResult_t heuristic {};
        int found = 0;
        checkBlas(cublasLtMatmulAlgoGetHeuristic(lt, desc.handle, first.handle, second.handle, out.handle, out.handle,
                      pref.handle, 1, &heuristic, &found),
            m_device, "cublasLtMatmulAlgoGetHeuristic");
        if (found == 0)
            throw DeviceError(m_device.name() + ": cuBLASLt has no algorithm for " + gemmPrecisionName(m_precision)
                + " " + std::to_string(M) + "x" + std::to_string(N) + "x" + std::to_string(K));
        algo = heuristic.algo;
        std::memcpy(m_scratch->algorithms[key].data(), &algo, sizeof algo);
    }
    const float alpha = 1.0f;
    checkBlas(
        cublasLtMatmul(lt, desc.handle, &alpha, b, first.handle, a, second.handle, &beta, C, out.handle, C, out.handle,
            &algo, m_scratch->workspace.data(), workspace, static_cast<cudaStream_t>(m_stream.handle)),
        m_device, "cublasLtMatmul");
}

void CudaKernels::rowMajorBatched(bool transA, bool transB, int M, int N, int K, float alpha, const float* A, int lda,
    long long strideA, const float* B, int ldb, long long strideB, float* C, int ldc, long long strideC, int batch)
{
    const float beta = 0.0f;
    checkBlas(
        cublasGemmStridedBatchedEx(static_cast<cublasHandle_t>(m_blas), transB ? CUBLAS_OP_T : CUBLAS_OP_N,
            transA ? CUBLAS_OP_T : CUBLAS_OP_N, N, M, K, &alpha, B, CUDA_R_32F, ldb, strideB, A, CUDA_R_32F, lda,
            strideA, &beta, C, CUDA_R_32F, ldc, strideC, batch, batchedComputeType(m_precision), CUBLAS_GEMM_DEFAULT),
        m_device, "cublasGemmStridedBatchedEx");
}

} // namespace loom::device
