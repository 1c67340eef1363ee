// Every piece of the trainer's state lives on the Device of TrainOptions::device, whatever the layout shares
// or shards: parameters, gradients and AdamW's moments (Replicated, ZeRO-1 both ways, ZeRO-2/3's shard and
// gathered units), staleness 1's delayed gradients, and the buffers the pipeline sends and receives. Each case
// trains two steps on a counting device and on the host: the device holds at least the model state the
// strategy reports, and the losses are the same bits. Run: mpirun -np 2 tst_trainerstate
#include "engine/plan/LayoutParser.h"
#include "engine/profiles/BuiltinProfiles.h"
#include "engine/train/CpuKernels.h"
#include "engine/train/Trainer.h"
#include "tests/engine/comm/MpiTest.h"

#include "CountingDevice.h"

#include <string>
#include <vector>

using namespace loom;

namespace {

std::string layoutText(int pp, int dp, int zero, int staleness, const char* codec)
{
    return "{\"loom_layout\": 1, \"name\": \"state\", \"model\": \"gpt-tiny\", \"cluster\": \"local\", \"parallel\": "
           "{\"tp\": 1, \"pp\": "
        + std::to_string(pp) + ", \"dp\": " + std::to_string(dp) + ", \"micro_batch\": 2, \"global_batch\": "
        + std::to_string(4 * dp) + "}, \"memory\": {\"zero\": " + std::to_string(zero)
        + ", \"recompute\": \"none\"}, \"comm\": {\"staleness\": " + std::to_string(staleness)
        + ", \"bucket_mb\": 0.05, \"dp_codec\": \"" + codec + "\"}}";
}

struct Run {
    std::vector<double> losses;
    train::ModelStateBytes state;
    std::size_t live = 0; // bytes on the counting device after the steps, the trainer still alive
};

// Two steps on `counting` (null: on the host).
Run train2(const plan::Layout& layout, test::CountingDevice* counting)
{
    auto comms = comm::makeMpiGridCommunicators(plan::RankGrid::forLayout(layout), nullptr);
    const train::Corpus corpus = train::Corpus::synthetic(1);
    train::CpuKernels kernels;
    train::TrainOptions options;
    options.steps = 2;
    options.device = counting;
    options.shareParameters = false; // shared memory is host memory by definition; the device case is asked
    train::Trainer trainer(layout, comms, corpus, options, kernels);
    Run run;
    for (std::int64_t s = 0; s < options.steps; ++s)
        run.losses.push_back(trainer.step(s).loss);
    run.state = trainer.modelStateBytes();
    run.live = counting ? counting->live() : 0;
    return run;
}

} // namespace

class TestTrainerState : public QObject {
    Q_OBJECT
private slots:
    void stateOnTheDevice_data()
    {
        QTest::addColumn<int>("pp");
        QTest::addColumn<int>("dp");
        QTest::addColumn<int>("zero");
        QTest::addColumn<int>("staleness");
        QTest::addColumn<QString>("codec");
        QTest::newRow("dp2 replicated") << 1 << 2 << 0 << 0 << "none";
        QTest::newRow("dp2 zero1 distributed optimizer") << 1 << 2 << 1 << 0 << "none";
        QTest::newRow("dp2 zero1 with a codec") << 1 << 2 << 1 << 0 << "fp16";
        QTest::newRow("dp2 zero2") << 1 << 2 << 2 << 0 << "none";
        QTest::newRow("dp2 zero3") << 1 << 2 << 3 << 0 << "none";
        QTest::newRow("dp2 staleness 1") << 1 << 2 << 0 << 1 << "none";
        QTest::newRow("pp2") << 2 << 1 << 0 << 0 << "none";
    }
    void stateOnTheDevice()
    {
        QFETCH(int, pp);
        QFETCH(int, dp);
        QFETCH(int, zero);
        QFETCH(int, staleness);
        QFETCH(QString, codec);
        const auto read = plan::readLayout(
            layoutText(pp, dp, zero, staleness, codec.toStdString().c_str()), profiles::BuiltinProfiles::instance());
        QVERIFY2(read.ok(), read.diagnostics.format().c_str());
        test::CountingDevice counting;
        const Run onDevice = train2(*read.layout, &counting);
        QCOMPARE(counting.live(), std::size_t(0)); // the trainer gone, all it allocated went back
        const auto& s = onDevice.state;
        const std::size_t live = onDevice.live;
        QVERIFY(s.optimizer > 0);
        QVERIFY2(live >= s.params + s.grads + s.optimizer,
            qPrintable(QString("the device saw %1 bytes; the model state is %2 + %3 + %4")
                           .arg(live)
                           .arg(s.params)
                           .arg(s.grads)
                           .arg(s.optimizer)));
        if (pp > 1) // the activations and their gradients passed between the stages, by device copies
            QVERIFY(counting.copied[device::CopyKind::DeviceToDevice] > 0);
        if (staleness > 0) // the delayed gradients and the swap through them
            QVERIFY(live >= s.params + 2 * s.grads + s.optimizer);
        const Run onHost = train2(*read.layout, nullptr);
        QCOMPARE(onDevice.losses, onHost.losses);
    }
};

int main(int argc, char** argv)
{
    return comm::testing::runOnEveryRank<TestTrainerState>(argc, argv);
}
#include "tst_trainerstate.moc"
