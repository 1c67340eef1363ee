// The stage's parameters and gradients are allocated, filled and initialised through the Device it is given
// (GptStage::Config::device), and give their memory back to it; the values do not depend on the device.
#include "engine/device/CpuDevice.h"
#include "engine/train/CpuKernels.h"
#include "engine/train/GptStage.h"

#include <QTest>

#include "GradCheckModel.h"

#include <map>

using namespace loom;
using namespace loom::train;

namespace {

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

GptStage::Config wholeModel(device::Device* d)
{
    GptStage::Config c;
    c.model = test::smallGradCheckModel();
    c.chunks = { { { 0, 1 }, true, true } };
    c.device = d;
    return c;
}

} // namespace

class TestParamDevice : public QObject {
    Q_OBJECT

private slots:
    void parametersAndGradientsLiveOnTheDevice()
    {
        CountingDevice counting;
        CpuKernels kernels;
        std::size_t flatBytes = 0;
        {
            GptStage stage(wholeModel(&counting), kernels);
            ParamSet& params = stage.params();
            flatBytes = params.flatSize() * sizeof(float);
            QVERIFY(flatBytes > 0);
            // The values and the gradients: one allocation each, filled with zeros there.
            QCOMPARE(counting.live(), 2 * flatBytes);
            QCOMPARE(counting.filled, 2 * params.flatSize());
            // The initial values are computed on the host and copied to the device, every element once.
            params.initialise(7);
            QCOMPARE(counting.copied[device::CopyKind::HostToDevice], flatBytes);
            // Releasing the flat gradients (ZeRO-2/3) gives their memory back.
            params.releaseFlat(false, true);
            QCOMPARE(counting.live(), flatBytes);
        }
        QCOMPARE(counting.live(), std::size_t(0)); // the stage gone, nothing is left on the device
        QCOMPARE(counting.allocated, 2 * flatBytes);
    }

    void valuesDoNotDependOnTheDevice()
    {
        CountingDevice counting;
        CpuKernels kernels;
        GptStage onDevice(wholeModel(&counting), kernels), onHost(wholeModel(nullptr), kernels);
        onDevice.params().initialise(11);
        onHost.params().initialise(11);
        QCOMPARE(onDevice.params().flatSize(), onHost.params().flatSize());
        for (std::size_t i = 0; i < onHost.params().flatSize(); ++i)
            QCOMPARE(onDevice.params().values[i], onHost.params().values[i]);
        QCOMPARE(&onHost.params().values.device(), &hostDevice());
    }
};

QTEST_APPLESS_MAIN(TestParamDevice)
#include "tst_paramdevice.moc"
