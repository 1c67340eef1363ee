// loom-device-check's checks of the Device contract on the GPU (Device.h): typed buffers round-trip through
// every copy kind and through a second stream, float and byte fills, events ordered across streams and
// timing a copy, and the errors it promises (an unrecorded event, an allocation beyond the GPU's memory).
#include "engine/tools/DeviceCheckCases.h"

#include <cstdio>
#include <numeric>
#include <string>
#include <vector>

namespace loom::tools {

namespace {

int say(const char* name, bool ok, const std::string& detail = {})
{
    std::printf("  dev  %-28s %s  %s\n", name, ok ? "ok  " : "FAIL", detail.c_str());
    return ok ? 0 : 1;
}

} // namespace

int checkDevice(device::Device& gpu)
{
    std::printf("item 1: the Device contract on %s\n", gpu.name().c_str());
    int failures = 0;
    const std::size_t n = (std::size_t(1) << 20) + 3;
    std::vector<float> host(n);
    std::iota(host.begin(), host.end(), -7.0f);
    device::Buffer<float> a(gpu, n), b(gpu, n);
    a.upload(host);
    device::Stream side = gpu.createStream();
    device::Event done = gpu.createEvent();
    gpu.copyBytes(b.data(), a.data(), a.bytes(), device::CopyKind::DeviceToDevice, side);
    gpu.recordEvent(done, side);
    gpu.waitEvent(device::Stream {}, done); // the default stream's download waits for the side stream's copy
    failures += say("copies through two streams", b.download() == host);

    gpu.fillBytes(a.data(), 0xff, a.bytes());
    gpu.fillFloats(a.data(), -2.5f, n);
    const auto filled = a.download();
    failures += say("fillFloats over a NaN pattern", filled.front() == -2.5f && filled.back() == -2.5f);
    gpu.fillBytes(a.data(), 0, a.bytes());
    failures += say("fillBytes zero", a.download().back() == 0.0f);

    device::Event start = gpu.createEvent(), end = gpu.createEvent();
    gpu.recordEvent(start, side);
    for (int i = 0; i < 10; ++i)
        gpu.copyBytes(b.data(), a.data(), a.bytes(), device::CopyKind::DeviceToDevice, side);
    gpu.recordEvent(end, side);
    const double ms = gpu.elapsedMs(start, end);
    failures += say("events time ten 4 MiB copies", ms > 0.0, std::to_string(ms) + " ms");

    device::Event never = gpu.createEvent();
    bool threw = false;
    try {
        gpu.elapsedMs(never, end);
    } catch (const device::DeviceError&) {
        threw = true;
    }
    failures += say("elapsedMs of an unrecorded event throws", threw);

    std::string message;
    try {
        gpu.freeBytes(gpu.allocateBytes(std::size_t(1) << 50)); // 1 PiB
    } catch (const device::DeviceError& e) {
        message = e.what();
    }
    failures += say("a 1 PiB allocation throws", message.find("free") != std::string::npos, message);
    gpu.synchronize();
    failures += say("and the device still works", b.download().back() == 0.0f);

    for (device::Event e : { done, start, end, never })
        gpu.destroyEvent(e);
    gpu.destroyStream(side);
    return failures;
}

} // namespace loom::tools
