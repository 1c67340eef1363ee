// KernelStep, the kernel sequence of a GPT-2 step that loom-device-check --step times on a GPU, run here on
// CpuDevice with CpuKernels: its gradients against central finite differences of the loss, so a wrong
// shape, offset or transpose in the sequence fails on the CPU before it ever reaches a GPU.
#include "engine/device/CpuDevice.h"
#include "engine/device/KernelStep.h"
#include "engine/train/CpuKernels.h"
#include "engine/train/VocabSoftmax.h"

#include <QTest>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

using namespace loom;

namespace {

// Σ over rows of the cross-entropy (scale 1, so gradients are not divided by the rows), written to `loss`,
// with the logits turned into their gradient in place, through the CPU engine's vocab softmax.
device::KernelStep::Loss summedLoss(double& loss)
{
    return [&loss](float* z, const std::int32_t* targets, int T, int V) {
        const auto rows = static_cast<std::size_t>(T);
        std::vector<float> max(rows), sums(rows), shift(rows);
        train::vocab::rowMax(z, T, V, 0, V, max.data(), 1);
        train::vocab::expSums(z, T, V, max.data(), targets, 0, sums.data(), shift.data(), 1);
        loss = 0;
        for (int t = 0; t < T; ++t)
            loss += std::log(double(sums[std::size_t(t)])) - shift[std::size_t(t)];
        train::vocab::gradient(z, T, V, sums.data(), targets, 0, 1.0f, 1);
    };
}

} // namespace

class TstKernelStep : public QObject {
    Q_OBJECT
private slots:
    void gradientsMatchFiniteDifferences()
    {
        device::CpuDevice cpu;
        train::CpuKernels kernels;
        double loss = 0;
        const device::StepShape shape { 2, 6, 16, 2, 2, 23 };
        device::KernelStep step(cpu, kernels, shape, summedLoss(loss), 7);
        step.run();
        const std::size_t n = step.parameterCount();
        const std::vector<float> grads(step.gradients(), step.gradients() + n);
        QVERIFY(std::all_of(grads.begin(), grads.end(), [](float g) { return std::isfinite(g); }));
        // The largest gradients (each of them well above the differences' noise), and a spread of others.
        std::vector<std::size_t> order(n);
        std::iota(order.begin(), order.end(), 0);
        std::sort(order.begin(), order.end(), [&](auto a, auto b) { return std::abs(grads[a]) > std::abs(grads[b]); });
        int checked = 0;
        for (std::size_t rank = 0; rank < n && checked < 24; rank += rank < 8 ? 1 : n / 40 + 1) {
            const std::size_t i = order[rank];
            if (std::abs(grads[i]) < 2e-2f)
                break;
            float* p = step.parameters() + i;
            const float keep = *p, eps = 1e-3f;
            *p = keep + eps;
            step.run();
            const double up = loss;
            *p = keep - eps;
            step.run();
            const double down = loss;
            *p = keep;
            const double numeric = (up - down) / (2.0 * eps);
            QVERIFY2(std::abs(numeric - grads[i]) <= 0.03 * std::abs(grads[i]) + 2e-3,
                qPrintable(
                    QString("parameter %1: backward %2, finite difference %3").arg(i).arg(grads[i]).arg(numeric)));
            ++checked;
        }
        QVERIFY2(checked >= 8, qPrintable(QString("only %1 gradients were large enough to check").arg(checked)));
    }
};

QTEST_GUILESS_MAIN(TstKernelStep)
#include "tst_kernelstep.moc"
