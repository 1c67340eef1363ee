// The trainer keeps its parameters, gradients and AdamW's moments on the Device of TrainOptions::device, and
// a checkpoint is written and read through host copies of them: every parameter and both moments copied
// device -> host once when saved, host -> device once when resumed, and the resumed values equal the saved
// ones. Run: mpirun -np 1
// tst_trainerdevice
#include "engine/plan/LayoutParser.h"
#include "engine/profiles/BuiltinProfiles.h"
#include "engine/train/CpuKernels.h"
#include "engine/train/Trainer.h"
#include "tests/engine/comm/MpiTest.h"

#include "CountingDevice.h"

#include <QTemporaryDir>

#include <algorithm>

#include <string>
#include <vector>

using namespace loom;

class TestTrainerDevice : public QObject {
    Q_OBJECT
private slots:
    void checkpointThroughTheDevice()
    {
        const std::string text = "{\"loom_layout\": 1, \"name\": \"device\", \"model\": \"gpt-tiny\", \"cluster\": "
                                 "\"local\", \"parallel\": {\"tp\": 1, \"pp\": 1, \"dp\": 1, \"micro_batch\": 2, "
                                 "\"global_batch\": 2}}";
        const auto read = plan::readLayout(text, profiles::BuiltinProfiles::instance());
        QVERIFY2(read.ok(), read.diagnostics.format().c_str());
        auto comms = comm::makeMpiGridCommunicators(plan::RankGrid::forLayout(*read.layout), nullptr);
        const train::Corpus corpus = train::Corpus::synthetic(1);
        train::CpuKernels kernels;
        QTemporaryDir dir;
        QVERIFY(dir.isValid());
        test::CountingDevice saving, resuming;
        train::TrainOptions options;
        options.steps = 2;
        options.device = &saving;
        std::vector<float> saved;
        std::size_t bytes = 0;
        {
            train::Trainer trainer(*read.layout, comms, corpus, options, kernels);
            bytes = trainer.stage().params().flatSize() * sizeof(float);
            QCOMPARE(saving.live(), 4 * bytes); // values, gradients and the two moments
            for (std::int64_t s = 0; s < options.steps; ++s)
                trainer.step(s);
            QCOMPARE(saving.copied[device::CopyKind::DeviceToHost], std::size_t(0));
            trainer.save(dir.path().toStdString(), options.steps);
            QCOMPARE(saving.copied[device::CopyKind::DeviceToHost], 3 * bytes); // values, m, v
            const auto& v = trainer.stage().params().values;
            saved.assign(v.begin(), v.end());
        }
        QCOMPARE(saving.live(), std::size_t(0));
        options.device = &resuming;
        train::Trainer again(*read.layout, comms, corpus, options, kernels);
        const std::size_t initialised = resuming.copied[device::CopyKind::HostToDevice];
        QCOMPARE(initialised, bytes); // the initial values, computed on the host
        const auto folder = train::latestCheckpoint(dir.path().toStdString());
        QVERIFY(folder);
        QCOMPARE(again.resume(*folder), std::int64_t(options.steps));
        QCOMPARE(resuming.copied[device::CopyKind::HostToDevice] - initialised, 3 * bytes);
        const auto& v = again.stage().params().values;
        QVERIFY(std::equal(v.begin(), v.end(), saved.begin(), saved.end()));
    }
};

int main(int argc, char** argv)
{
    return comm::testing::runOnEveryRank<TestTrainerDevice>(argc, argv);
}
#include "tst_trainerdevice.moc"
