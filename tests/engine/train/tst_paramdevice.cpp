// The stage's parameters and gradients are allocated, filled and initialised through the Device it is given
// (GptStage::Config::device), and give their memory back to it; the values do not depend on the device.
#include "engine/train/CpuKernels.h"
#include "engine/train/GptStage.h"

#include <QTest>

#include "CountingDevice.h"
#include "GradCheckModel.h"

using namespace loom;
using namespace loom::train;

namespace {

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
        test::CountingDevice counting;
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
        test::CountingDevice counting;
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
