#pragma once

#include "engine/device/Device.h"

namespace loom::device {

// The host as a Device: memory from the C++ heap (256-byte aligned), copies and fills done at the call
// (so every stream is already in order and synchronising waits for nothing), events as steady_clock stamps
// taken when recorded. Elapsed times are therefore host wall time between the two records, which on the
// CPU is the time of the work between them (it ran synchronously).
class CpuDevice final : public Device {
public:
    DeviceKind kind() const override { return DeviceKind::Cpu; }
    std::string name() const override { return "cpu"; }

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
};

} // namespace loom::device
