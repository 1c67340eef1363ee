#include "engine/device/CudaDevice.h"

#include "engine/device/CudaLaunch.h"

#include <cuda_runtime.h>

namespace loom::device {

namespace {

cudaStream_t streamOf(Stream s)
{
    return static_cast<cudaStream_t>(s.handle);
}

cudaEvent_t eventOf(Event e)
{
    return static_cast<cudaEvent_t>(e.handle);
}

cudaMemcpyKind copyKindOf(CopyKind kind)
{
    switch (kind) {
    case CopyKind::HostToDevice:
        return cudaMemcpyHostToDevice;
    case CopyKind::DeviceToHost:
        return cudaMemcpyDeviceToHost;
    case CopyKind::DeviceToDevice:
        break;
    }
    return cudaMemcpyDeviceToDevice;
}

} // namespace

void checkCuda(int status, const std::string& device, const char* call)
{
    if (status != cudaSuccess) {
        const auto e = static_cast<cudaError_t>(status);
        throw DeviceError(
            device + ": " + call + " failed: " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")");
    }
}

CudaDevice::CudaDevice(int ordinal)
    : m_ordinal(ordinal)
    , m_name("cuda:" + std::to_string(ordinal))
{
    int count = 0;
    const cudaError_t status = cudaGetDeviceCount(&count);
    if (status != cudaSuccess)
        throw DeviceError(m_name + ": no usable GPU: cudaGetDeviceCount failed: " + cudaGetErrorString(status));
    if (ordinal < 0 || ordinal >= count)
        throw DeviceError(m_name + ": no such GPU: " + std::to_string(count) + " visible");
    cudaDeviceProp prop {};
    checkCuda(cudaGetDeviceProperties(&prop, ordinal), m_name, "cudaGetDeviceProperties");
    m_name += std::string(" (") + prop.name + ")";
    makeCurrent();
}

void CudaDevice::makeCurrent() const
{
    checkCuda(cudaSetDevice(m_ordinal), m_name, "cudaSetDevice");
}

void* CudaDevice::allocateBytes(std::size_t bytes)
{
    if (bytes == 0)
        return nullptr;
    makeCurrent();
    void* p = nullptr;
    if (cudaMalloc(&p, bytes) != cudaSuccess) {
        cudaGetLastError(); // clear the sticky-free error so later calls do not report it
        std::size_t freeBytes = 0, total = 0;
        cudaMemGetInfo(&freeBytes, &total);
        throw DeviceError(m_name + ": cannot allocate " + std::to_string(bytes) + " bytes (" + std::to_string(freeBytes)
            + " of " + std::to_string(total) + " free)");
    }
    return p;
}

void CudaDevice::freeBytes(void* p) noexcept
{
    if (p) {
        cudaSetDevice(m_ordinal);
        cudaFree(p);
    }
}

void CudaDevice::copyBytes(void* dst, const void* src, std::size_t bytes, CopyKind kind, Stream stream)
{
    if (bytes == 0)
        return;
    makeCurrent();
    checkCuda(cudaMemcpyAsync(dst, src, bytes, copyKindOf(kind), streamOf(stream)), m_name, "cudaMemcpyAsync");
}

void CudaDevice::fillBytes(void* dst, std::uint8_t value, std::size_t bytes, Stream stream)
{
    if (bytes == 0)
        return;
    makeCurrent();
    checkCuda(cudaMemsetAsync(dst, value, bytes, streamOf(stream)), m_name, "cudaMemsetAsync");
}

void CudaDevice::fillFloats(float* dst, float value, std::size_t n, Stream stream)
{
    if (n == 0)
        return;
    makeCurrent();
    launchFillFloats(dst, value, n, stream.handle);
    checkCuda(cudaGetLastError(), m_name, "fill kernel launch");
}

Stream CudaDevice::createStream()
{
    makeCurrent();
    cudaStream_t s = nullptr;
    checkCuda(cudaStreamCreateWithFlags(&s, cudaStreamDefault), m_name, "cudaStreamCreate");
    return Stream { s };
}

void CudaDevice::destroyStream(Stream stream) noexcept
{
    if (stream.handle)
        cudaStreamDestroy(streamOf(stream));
}

void CudaDevice::synchronize(Stream stream)
{
    makeCurrent();
    checkCuda(cudaStreamSynchronize(streamOf(stream)), m_name, "cudaStreamSynchronize");
}

void CudaDevice::synchronize()
{
    makeCurrent();
    checkCuda(cudaDeviceSynchronize(), m_name, "cudaDeviceSynchronize");
}

Event CudaDevice::createEvent()
{
    makeCurrent();
    cudaEvent_t e = nullptr;
    checkCuda(cudaEventCreate(&e), m_name, "cudaEventCreate");
    return Event { e };
}

void CudaDevice::destroyEvent(Event event) noexcept
{
    if (event.handle)
        cudaEventDestroy(eventOf(event));
}

void CudaDevice::recordEvent(Event event, Stream stream)
{
    makeCurrent();
    checkCuda(cudaEventRecord(eventOf(event), streamOf(stream)), m_name, "cudaEventRecord");
}

void CudaDevice::waitEvent(Stream stream, Event event)
{
    makeCurrent();
    checkCuda(cudaStreamWaitEvent(streamOf(stream), eventOf(event), 0), m_name, "cudaStreamWaitEvent");
}

void CudaDevice::synchronizeEvent(Event event)
{
    checkCuda(cudaEventSynchronize(eventOf(event)), m_name, "cudaEventSynchronize");
}

double CudaDevice::elapsedMs(Event start, Event end)
{
    synchronizeEvent(end);
    float ms = 0;
    // An event never recorded gives cudaErrorInvalidResourceHandle: the DeviceError the interface promises.
    checkCuda(cudaEventElapsedTime(&ms, eventOf(start), eventOf(end)), m_name, "cudaEventElapsedTime");
    return ms;
}

} // namespace loom::device
