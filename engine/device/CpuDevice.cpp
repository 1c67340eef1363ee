#include "engine/device/CpuDevice.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <new>

namespace loom::device {

namespace {

constexpr std::size_t kAlignment = 256; // as cudaMalloc's, so code tuned on one holds on the other

struct CpuEvent {
    std::chrono::steady_clock::time_point stamp;
    bool recorded = false;
};

// Streams carry nothing on the host; a distinct non-null handle per stream lets a test tell them apart.
struct CpuStream {
    int unused = 0;
};

CpuEvent& eventOf(Event event, const char* call)
{
    if (!event.handle)
        throw DeviceError(std::string("cpu: ") + call + " on an event that was never created");
    return *static_cast<CpuEvent*>(event.handle);
}

} // namespace

const char* deviceKindName(DeviceKind kind)
{
    return kind == DeviceKind::Cuda ? "cuda" : "cpu";
}

void* CpuDevice::allocateBytes(std::size_t bytes)
{
    if (bytes == 0)
        return nullptr;
    const std::size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
    if (rounded < bytes)
        throw DeviceError("cpu: cannot allocate " + std::to_string(bytes) + " bytes (size overflows)");
    void* p = std::aligned_alloc(kAlignment, rounded);
    if (!p)
        throw DeviceError("cpu: cannot allocate " + std::to_string(bytes) + " bytes of host memory");
    return p;
}

void CpuDevice::freeBytes(void* p) noexcept
{
    std::free(p);
}

void CpuDevice::copyBytes(void* dst, const void* src, std::size_t bytes, CopyKind, Stream)
{
    if (bytes == 0)
        return;
    if (!dst || !src)
        throw DeviceError("cpu: copy of " + std::to_string(bytes) + " bytes with a null pointer");
    std::memmove(dst, src, bytes); // a device-to-device copy within one buffer may overlap
}

void CpuDevice::fillBytes(void* dst, std::uint8_t value, std::size_t bytes, Stream)
{
    if (bytes == 0)
        return;
    if (!dst)
        throw DeviceError("cpu: fill of " + std::to_string(bytes) + " bytes at a null pointer");
    std::memset(dst, value, bytes);
}

void CpuDevice::fillFloats(float* dst, float value, std::size_t n, Stream)
{
    if (n == 0)
        return;
    if (!dst)
        throw DeviceError("cpu: fill of " + std::to_string(n) + " floats at a null pointer");
    std::fill_n(dst, n, value);
}

Stream CpuDevice::createStream()
{
    return Stream { new CpuStream };
}

void CpuDevice::destroyStream(Stream stream) noexcept
{
    delete static_cast<CpuStream*>(stream.handle);
}

void CpuDevice::synchronize(Stream)
{
}

void CpuDevice::synchronize()
{
}

Event CpuDevice::createEvent()
{
    return Event { new CpuEvent };
}

void CpuDevice::destroyEvent(Event event) noexcept
{
    delete static_cast<CpuEvent*>(event.handle);
}

void CpuDevice::recordEvent(Event event, Stream)
{
    CpuEvent& e = eventOf(event, "recordEvent");
    e.stamp = std::chrono::steady_clock::now();
    e.recorded = true;
}

void CpuDevice::waitEvent(Stream, Event event)
{
    eventOf(event, "waitEvent"); // work before a recorded event is already done on the host
}

void CpuDevice::synchronizeEvent(Event event)
{
    eventOf(event, "synchronizeEvent");
}

double CpuDevice::elapsedMs(Event start, Event end)
{
    const CpuEvent& a = eventOf(start, "elapsedMs");
    const CpuEvent& b = eventOf(end, "elapsedMs");
    if (!a.recorded || !b.recorded)
        throw DeviceError(std::string("cpu: elapsedMs with an event that was never recorded (")
            + (a.recorded ? "end" : "start") + ")");
    return std::chrono::duration<double, std::milli>(b.stamp - a.stamp).count();
}

} // namespace loom::device
