// ZeRO-2 and ZeRO-3 hold what they promise: gpt-tiny on 3 ranks (dp 3, so units do not split evenly and
// pieces are padded) after a few steps. ZeRO-3 keeps no full parameter buffer between steps: every tensor
// is unbound and the parameter bytes are this rank's pieces only, about 1/3 of the unsharded run's; the
// three ranks' pieces cover the model once (plus padding). ZeRO-2 keeps the full parameters but only the
// pieces of the gradient. The model's parameters gathered back from the ZeRO-3 pieces equal the unsharded
// run's after the same steps. Run: mpirun -np 3 tst_zero_memory
#include "engine/plan/LayoutParser.h"
#include "engine/profiles/BuiltinProfiles.h"
#include "engine/train/Checkpoint.h"
#include "engine/train/CpuKernels.h"
#include "engine/train/Trainer.h"
#include "tests/engine/comm/MpiTest.h"

#include <QDir>
#include <QFile>

#include <unistd.h>

#include <cmath>
#include <string>

using namespace loom;

namespace {

constexpr int kSteps = 3;

plan::Layout layoutWith(int zero)
{
    const std::string text
        = "{\"loom_layout\": 1, \"name\": \"zero-memory\", \"model\": \"gpt-tiny\", \"cluster\": \"local\", "
          "\"parallel\": {\"tp\": 1, \"pp\": 1, \"dp\": 3, \"micro_batch\": 2, \"global_batch\": 12}, "
          "\"memory\": {\"zero\": "
        + std::to_string(zero) + "}}";
    const auto read = plan::readLayout(text, profiles::BuiltinProfiles::instance());
    if (!read.ok())
        throw std::runtime_error(read.diagnostics.format());
    return *read.layout;
}

std::int64_t sumOver(comm::Communicator& group, std::int64_t value)
{
    group.allReduce(&value, 1, comm::DType::I64, comm::ReduceOp::Sum)->wait();
    return value;
}

} // namespace

class TestZeroMemory : public QObject {
    Q_OBJECT
    comm::GridCommunicators m_comms;
    train::Corpus m_corpus = train::Corpus::synthetic(1);
    train::CpuKernels m_kernels;
    train::Trainer::ModelStateBytes m_unsharded;
    std::vector<float> m_unshardedValues; // after kSteps

private slots:
    void initTestCase()
    {
        QCOMPARE(comm::testing::worldSize(), 3);
        m_comms = comm::makeMpiGridCommunicators(plan::RankGrid::forLayout(layoutWith(0)), nullptr);
        train::TrainOptions options;
        options.steps = kSteps;
        train::Trainer trainer(layoutWith(0), m_comms, m_corpus, options, m_kernels);
        for (std::int64_t s = 0; s < kSteps; ++s)
            trainer.step(s);
        m_unsharded = trainer.modelStateBytes();
        m_unshardedValues.assign(trainer.stage().params().values.begin(), trainer.stage().params().values.end());
        QCOMPARE(m_unsharded.params, m_unshardedValues.size() * sizeof(float));
    }

    void zero3HoldsItsPiecesOnly()
    {
        train::TrainOptions options;
        options.steps = kSteps;
        train::Trainer trainer(layoutWith(3), m_comms, m_corpus, options, m_kernels);
        for (std::int64_t s = 0; s < kSteps; ++s)
            trainer.step(s);
        train::ParamSet& params = trainer.stage().params();
        QVERIFY(params.values.empty());
        QVERIFY(params.grads.empty());
        for (int i = 0; i < static_cast<int>(params.specs().size()); ++i)
            QVERIFY2(params.value(i) == nullptr && params.grad(i) == nullptr,
                qPrintable(QString::fromStdString(params.spec(i).name) + " is still held whole between steps"));
        const auto b = trainer.modelStateBytes();
        const std::size_t full = m_unsharded.params;
        // One piece per unit: at most one padding element per unit beyond an even third.
        const std::size_t units = params.specs().size();
        QVERIFY2(b.params >= full / 3 && b.params <= full / 3 + units * sizeof(float),
            qPrintable(QStringLiteral("%1 bytes of parameters held of %2").arg(b.params).arg(full)));
        QCOMPARE(b.grads, b.params);
        QVERIFY(b.optimizer == 2 * b.params);
        const auto together = static_cast<std::size_t>(sumOver(*m_comms.data, static_cast<std::int64_t>(b.params)));
        QVERIFY(together >= full && together <= full + 3 * units * sizeof(float));
        // During a step a block is gathered whole, but never the whole model's blocks at once.
        QVERIFY(b.peakParams > b.params);
        QVERIFY2(b.peakParams < full + b.params, qPrintable(QString::number(b.peakParams)));

        // The pieces hold the same model as the unsharded run after the same steps: a checkpoint written
        // from them (each rank its pieces) has every tensor whole.
        std::int64_t job = ::getpid();
        m_comms.world->broadcast(&job, 1, comm::DType::I64, 0)->wait();
        const std::string dir = QDir::tempPath().toStdString() + "/loom-zero-memory-" + std::to_string(job);
        trainer.save(dir, kSteps);
        if (m_comms.world->rank() == 0) {
            const auto folder = train::latestCheckpoint(dir);
            QVERIFY(folder);
            double worst = 0;
            for (const auto& spec : params.specs()) {
                QFile f(QString::fromStdString(*folder + "/" + spec.name + ".f32"));
                QVERIFY(f.open(QIODevice::ReadOnly));
                const QByteArray bytes = f.readAll();
                QCOMPARE(static_cast<std::size_t>(bytes.size()), spec.size() * sizeof(float));
                const auto* v = reinterpret_cast<const float*>(bytes.constData());
                for (std::size_t k = 0; k < spec.size(); ++k) {
                    const double want = m_unshardedValues[spec.offset + k];
                    worst = std::max(worst, std::abs(v[k] - want) / (1e-3 + std::abs(want)));
                }
            }
            QVERIFY2(worst < 1e-4, qPrintable(QString::number(worst)));
            QDir(QString::fromStdString(dir)).removeRecursively();
        }
        m_comms.world->barrier()->wait();
    }

    void zero2ShardsGradients()
    {
        train::TrainOptions options;
        options.steps = kSteps;
        train::Trainer trainer(layoutWith(2), m_comms, m_corpus, options, m_kernels);
        for (std::int64_t s = 0; s < kSteps; ++s)
            trainer.step(s);
        const auto b = trainer.modelStateBytes();
        train::ParamSet& params = trainer.stage().params();
        QCOMPARE(params.values.size(), m_unshardedValues.size());
        QVERIFY(params.grads.empty());
        QVERIFY(b.grads >= m_unsharded.grads / 3 && b.grads <= m_unsharded.grads / 3 + 64 * sizeof(float));
        QVERIFY(b.optimizer == 2 * b.grads);
        // Every rank's full parameters equal the unsharded run's (the all-gather after each step).
        double worst = 0;
        for (std::size_t k = 0; k < params.values.size(); ++k)
            worst = std::max(worst,
                std::abs(double(params.values[k]) - m_unshardedValues[k]) / (1e-3 + std::abs(m_unshardedValues[k])));
        QVERIFY2(worst < 1e-4, qPrintable(QString::number(worst)));
    }
};

int main(int argc, char** argv)
{
    return comm::testing::runOnEveryRank<TestZeroMemory>(argc, argv);
}
#include "tst_zero_memory.moc"
