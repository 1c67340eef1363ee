#pragma once
// A Device over host memory that counts what is asked of it (tst_paramdevice, tst_trainerdevice): what the
// trainer allocates, fills and copies where.
#include "engine/device/CpuDevice.h"

#include <map>

namespace loom::test {

// Host memory, with every call counted: what the stage asked of its device.
class CountingDevice final : public device::Device {
public:
    device::DeviceKind kind() const override { return device::DeviceKind::Cpu; }
    std::string name() const override { return "counting cpu"; }
    void* allocateBytes(std::size_t bytes) override
    {
        void* p = m_host.allocateBytes(bytes);
        if (p)
            m_live[p] = bytes;
        allocated += bytes;
        return p;
    }
    void freeBytes(void* p) noexcept override
    {
        if (auto it = m_live.find(p); it != m_live.end()) {
            freed += it->second;
            m_live.erase(it);
        }
        m_host.freeBytes(p);
    }
    void copyBytes(void* dst, const void* src, std::size_t bytes, device::CopyKind kind, device::Stream s) override
    {
        copied[kind] += bytes;
        m_host.copyBytes(dst, src, bytes, kind, s);
    }
    void fillBytes(void* dst, std::uint8_t value, std::size_t bytes, device::Stream s) override
    {
        m_host.fillBytes(dst, value, bytes, s);
    }
    void fillFloats(float* dst, float value, std::size_t n, device::Stream s) override
    {
        filled += n;
        m_host.fillFloats(dst, value, n, s);
    }
    device::Stream createStream() override { return m_host.createStream(); }
    void destroyStream(device::Stream s) noexcept override { m_host.destroyStream(s); }
    void synchronize(device::Stream s) override { m_host.synchronize(s); }
    void synchronize() override { m_host.synchronize(); }
    device::Event createEvent() override { return m_host.createEvent(); }
    void destroyEvent(device::Event e) noexcept override { m_host.destroyEvent(e); }
    void recordEvent(device::Event e, device::Stream s) override { m_host.recordEvent(e, s); }
    void waitEvent(device::Stream s, device::Event e) override { m_host.waitEvent(s, e); }
    void synchronizeEvent(device::Event e) override { m_host.synchronizeEvent(e); }
    double elapsedMs(device::Event a, device::Event b) override { return m_host.elapsedMs(a, b); }

    std::size_t allocated = 0, freed = 0, filled = 0;
    std::map<device::CopyKind, std::size_t> copied;
    std::size_t live() const { return allocated - freed; }

private:
    device::CpuDevice m_host;
    std::map<void*, std::size_t> m_live;
};

} // namespace loom::test
