#pragma once

#include "engine/device/Device.h"

namespace loom::device {

// One CUDA GPU as a Device: cudaMalloc'd memory, cudaMemcpyAsync/cudaMemsetAsync in stream order, blocking
// streams (so the legacy default stream, Stream{}, still orders after them), and CUDA events timed on the
// GPU. Every call first makes this GPU current (cudaSetDevice), so several CudaDevices in one process, or
// several ranks on one GPU, do not disturb each other. Built only with the CUDA parts (LOOM_WITH_CUDA_DEVICE).
class CudaDevice final : public Device {
public:
    // Throws DeviceError when `ordinal` is not a usable GPU (with what cudaGetDeviceCount found).
    explicit CudaDevice(int ordinal = 0);

    DeviceKind kind() const override { return DeviceKind::Cuda; }
    std::string name() const override { return m_name; }
    int ordinal() const { return m_ordinal; }

    void* allocateBytes(std::size_t bytes) override;
    void freeBytes(void* p) noexcept override;
    void copyBytes(void* dst, const void* src, std::size_t bytes, CopyKind kind, Stream stream = {}) override;
    void fillBytes(void* dst, std::uint8_t value, std::size_t bytes, Stream stream = {}) override;
    void fillFloats(float* dst, float value, std::size_t n, Stream stream = {}) override;

    Stream createStream() override;
    void destroyStream(Stream stream) noexcept override;
    void synchronize(Stream stream) override;
    void synchronize() override;

    Event createEvent() override;
    void destroyEvent(Event event) noexcept override;
    void recordEvent(Event event, Stream stream = {}) override;
    void waitEvent(Stream stream, Event event) override;
    void synchronizeEvent(Event event) override;
    double elapsedMs(Event start, Event end) override;

private:
    void makeCurrent() const;
    int m_ordinal;
    std::string m_name;
};

} // namespace loom::device
